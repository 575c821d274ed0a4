"""One server's record in a `TokenStore`, as the SDK's `TokenStorage` sees it.

A record is a JSON object:

    tokens        the token response (access_token, token_type, scope, refresh_token), without
                  `expires_in`, which is relative to a moment the reader does not know
    expires_at    when the access token runs out (seconds since the epoch), or absent
    client        the client registration the authorization server gave (dynamic registration, or
                  the metadata document's URL as client id); absent for a pre-registered client,
                  whose id and secret come from the environment each time
    discovered    what `mcp login` discovered: the authorization server's metadata (`server`), the
                  protected resource metadata (`resource`) and the server chosen from it
                  (`auth_server_url`), so that a worker refreshes at the right token endpoint
    wanted_scope  scopes a worker was refused for lack of (`insufficient_scope`), asked for at the
                  next `mcp login`; gone once a sign-in grants them

The SDK hands tokens back with `expires_in` counted from now, and `FleetProvider` (providers.py)
turns it into its expiry when it loads them.
"""

import math
import time
from dataclasses import dataclass
from typing import Any, TypeVar

from mcp.shared.auth import (
    OAuthClientInformationFull,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from pydantic import BaseModel, ValidationError

from .stores import TokenStore

Model = TypeVar("Model", bound=BaseModel)


@dataclass(frozen=True)
class Discovered:
    server: OAuthMetadata | None = None
    resource: ProtectedResourceMetadata | None = None
    auth_server_url: str | None = None


class ServerTokens:
    """The SDK's `TokenStorage` over `store`'s record of `server`.

    Args:
        fixed_client: a pre-registered client (from the environment): returned as the client,
            never stored.
        fresh: hand out no tokens (`mcp login` signs in anew even when tokens are stored, so that
            it can ask for more scopes); the client registration is still reused.
    """

    def __init__(
        self,
        store: TokenStore,
        server: str,
        *,
        fixed_client: OAuthClientInformationFull | None = None,
        fresh: bool = False,
    ) -> None:
        self.store = store
        self.server = server
        self.fixed_client = fixed_client
        self.fresh = fresh

    async def record(self) -> dict[str, Any]:
        return await self.store.read(self.server) or {}

    async def get_tokens(self) -> OAuthToken | None:
        if self.fresh:
            return None
        return tokens_of(await self.record())

    async def set_tokens(self, tokens: OAuthToken) -> None:
        record = await self.record()
        fields = tokens.model_dump(mode="json", exclude_none=True)
        expires_in = fields.pop("expires_in", None)
        record["tokens"] = fields
        if expires_in is None:
            record.pop("expires_at", None)
        else:
            record["expires_at"] = time.time() + int(expires_in)
        wanted = set((record.get("wanted_scope") or "").split())
        if wanted <= set((tokens.scope or "").split()):
            record.pop("wanted_scope", None)
        self.fresh = False
        await self.store.write(self.server, record)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        if self.fixed_client is not None:
            return self.fixed_client
        client = (await self.record()).get("client")
        if not isinstance(client, dict):
            return None
        try:
            return OAuthClientInformationFull.model_validate(client)
        except ValidationError:
            return None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        if self.fixed_client is not None:
            return
        record = await self.record()
        record["client"] = client_info.model_dump(mode="json", exclude_none=True)
        await self.store.write(self.server, record)

    async def discovered(self) -> Discovered:
        found = (await self.record()).get("discovered")
        if not isinstance(found, dict):
            return Discovered()
        url = found.get("auth_server_url")
        return Discovered(
            server=_model(OAuthMetadata, found.get("server")),
            resource=_model(ProtectedResourceMetadata, found.get("resource")),
            auth_server_url=url if isinstance(url, str) else None,
        )

    async def remember(
        self,
        *,
        server: OAuthMetadata | None,
        resource: ProtectedResourceMetadata | None,
        auth_server_url: str | None,
    ) -> None:
        record = await self.record()
        found: dict[str, Any] = {}
        if server is not None:
            found["server"] = server.model_dump(mode="json", exclude_none=True)
        if resource is not None:
            found["resource"] = resource.model_dump(mode="json", exclude_none=True)
        if auth_server_url is not None:
            found["auth_server_url"] = auth_server_url
        record["discovered"] = found
        await self.store.write(self.server, record)

    async def want_scope(self, scope: str) -> None:
        """Remember scopes the server asked for, for the next sign-in."""
        record = await self.record()
        wanted = dict.fromkeys((record.get("wanted_scope") or "").split())
        wanted.update(dict.fromkeys(scope.split()))
        record["wanted_scope"] = " ".join(wanted)
        await self.store.write(self.server, record)


def tokens_of(record: dict[str, Any]) -> OAuthToken | None:
    """The record's tokens, `expires_in` counted from now (0 once run out)."""
    fields = record.get("tokens")
    if not isinstance(fields, dict):
        return None
    expires_at = record.get("expires_at")
    if isinstance(expires_at, int | float):
        fields = {**fields, "expires_in": max(0, math.floor(expires_at - time.time()))}
    try:
        return OAuthToken.model_validate(fields)
    except ValidationError:
        return None


def wanted_scope(record: dict[str, Any]) -> str | None:
    wanted = record.get("wanted_scope")
    return wanted if isinstance(wanted, str) and wanted else None


def _model(kind: type[Model], value: object) -> Model | None:
    if not isinstance(value, dict):
        return None
    try:
        return kind.model_validate(value)
    except ValidationError:
        return None
