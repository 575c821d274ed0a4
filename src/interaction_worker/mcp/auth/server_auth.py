"""One server's `auth:` made real: its secrets read from the environment (and its key file) at
start, the place its tokens live, and the SDK provider a worker or `mcp login` uses."""

import logging
import warnings
from collections.abc import Awaitable, Callable, Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Literal

from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from mcp.client.auth.extensions.client_credentials import SignedJWTParameters
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
)
from mcp.shared.exceptions import MCPDeprecationWarning
from nats.aio.client import Client

from ...config.model import McpAuthSettings
from ...errors import ConfigurationError
from .kv_store import BUCKET, KvTokenStore
from .providers import (
    Fleet,
    FleetClientCredentials,
    FleetPrivateKeyJWT,
    LoginOAuth,
    WorkerOAuth,
)
from .quiet import quiet_sdk_logs
from .storage import ServerTokens
from .stores import FileTokenStore, TokenStore, TokenStoreError

_LOGGER = logging.getLogger("interaction_worker.mcp")
CLIENT_NAME = "interaction-worker"
# Where a worker's provider would send a person back to, had it one; it never starts a sign-in.
_NO_REDIRECT = "http://127.0.0.1/callback"
_CURVES = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}


def package_version() -> str:
    try:
        return version("interaction-worker")
    except PackageNotFoundError:
        return "0"


class TokenPlace:
    """Where the tokens of every server of one worker (or one `mcp login`) live: files in
    `directory` (the embedded server), or the key-value bucket on the worker's NATS server once
    `bind` gives its connection."""

    def __init__(
        self,
        *,
        directory: Path | None = None,
        replicas: int = 1,
        bucket: str = BUCKET,
    ) -> None:
        self.directory = directory
        self.replicas = replicas
        self.bucket = bucket
        self._store: TokenStore | None = (
            None if directory is None else FileTokenStore(directory)
        )

    def bind(self, client: Client | None) -> None:
        if self.directory is None and client is not None and self._store is None:
            self._store = KvTokenStore(
                client, bucket=self.bucket, replicas=self.replicas
            )

    @property
    def store(self) -> TokenStore:
        if self._store is None:
            raise TokenStoreError("the token bucket is not connected")
        return self._store

    def paths(self) -> list[Path]:
        return [] if self.directory is None else [self.directory]


class ServerAuth:
    """The `auth:` of one HTTP server.

    Raises:
        ConfigurationError: a variable it names is not set, or its key file cannot be read or is
            not a private key (the message names the variable or the key, never a value).
    """

    def __init__(
        self,
        server: str,
        url: str,
        settings: McpAuthSettings,
        place: TokenPlace,
        environ: Mapping[str, str],
    ) -> None:
        quiet_sdk_logs()
        self.server = server
        self.url = url
        self.settings = settings
        self.place = place
        where = f"mcp.servers.{server}.auth"
        self._client_id = _variable(
            environ, settings.client_id_env, where, "client_id_env"
        )
        self._client_secret = _variable(
            environ, settings.client_secret_env, where, "client_secret_env"
        )
        self._key: str | None = None
        self._algorithm = settings.signing_algorithm
        if settings.private_key_file is not None:
            self._key, found = _private_key(settings.private_key_file, where)
            self._algorithm = self._algorithm or found
        self._provider: Fleet | None = None

    @property
    def signs_in(self) -> bool:
        """Whether a person signs in (`mcp login`), rather than the worker fetching its tokens."""
        return self.settings.type == "oauth"

    def bind(self, client: Client | None) -> None:
        self.place.bind(client)

    def protected_paths(self) -> list[Path]:
        """The files this server's credentials are in: no tool may read them."""
        key = self.settings.private_key_file
        return [*self.place.paths(), *([] if key is None else [key])]

    async def revision(self) -> object:
        try:
            return await self.place.store.revision(self.server)
        except TokenStoreError:
            return None

    def granted(self) -> set[str]:
        return set() if self._provider is None else self._provider.granted()

    def provider(self) -> Fleet:
        """The worker's provider, made once (it keeps what it discovered and its tokens)."""
        if self._provider is None:
            self._provider = self._worker_provider()
        return self._provider

    def storage(self, *, fresh: bool = False) -> ServerTokens:
        return ServerTokens(
            self.place.store,
            self.server,
            fixed_client=self._fixed_client(),
            fresh=fresh,
        )

    def _worker_provider(self) -> Fleet:
        settings = self.settings
        storage = self.storage()
        scope = None if settings.scopes is None else " ".join(settings.scopes)
        provider: Fleet
        if settings.type == "oauth":
            provider = WorkerOAuth(
                self.url,
                self._client_metadata(_NO_REDIRECT),
                storage,
                client_metadata_url=settings.client_metadata_url,
            )
        else:
            with warnings.catch_warnings():
                # Without `issuer` the SDK warns on every construction; the start warned once.
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                provider = self._client_credentials(storage, scope)
        provider.join_fleet(storage, person=False)
        return provider

    def _client_credentials(self, storage: ServerTokens, scope: str | None) -> Fleet:
        settings = self.settings
        client_id = self._client_id or ""
        if settings.token_endpoint_auth == "private_key_jwt":
            assertion = SignedJWTParameters(
                issuer=client_id,
                subject=client_id,
                signing_key=self._key or "",
                signing_algorithm=self._algorithm or "RS256",
            ).create_assertion_provider()
            return FleetPrivateKeyJWT(
                self.url,
                storage,
                client_id,
                assertion,
                scope=scope,
                issuer=settings.issuer,
            )
        method: Literal["client_secret_basic", "client_secret_post"] = (
            "client_secret_post"
            if settings.token_endpoint_auth == "client_secret_post"
            else "client_secret_basic"
        )
        return FleetClientCredentials(
            self.url,
            storage,
            client_id,
            self._client_secret or "",
            token_endpoint_auth_method=method,
            scope=scope,
            issuer=settings.issuer,
        )

    def login_provider(
        self,
        redirect_uri: str,
        redirect_handler: Callable[[str], Awaitable[None]],
        callback_handler: Callable[[], Awaitable[AuthorizationCodeResult]],
        *,
        wanted: str | None,
    ) -> LoginOAuth:
        """The provider `mcp login` signs in with: the SDK's whole authorization-code flow."""
        storage = self.storage(fresh=True)
        provider = LoginOAuth(
            self.url,
            self._client_metadata(redirect_uri),
            storage,
            redirect_handler,
            callback_handler,
            client_metadata_url=self.settings.client_metadata_url,
        )
        provider.join_fleet(storage, person=True)
        provider.wanted = wanted
        return provider

    def _client_metadata(self, redirect_uri: str) -> OAuthClientMetadata:
        settings = self.settings
        return OAuthClientMetadata.model_validate(
            {
                "redirect_uris": [redirect_uri],
                "client_name": CLIENT_NAME,
                "software_version": package_version(),
                "grant_types": ["authorization_code", "refresh_token"],
                "token_endpoint_auth_method": self._method()
                if self._client_id is not None
                else None,
                "scope": None if settings.scopes is None else " ".join(settings.scopes),
            }
        )

    def _method(self) -> str:
        configured = self.settings.token_endpoint_auth
        if configured is not None:
            return configured
        return "client_secret_basic" if self._client_secret else "none"

    def _fixed_client(self) -> OAuthClientInformationFull | None:
        """A pre-registered `type: oauth` client, from the environment."""
        if self.settings.type != "oauth" or self._client_id is None:
            return None
        return OAuthClientInformationFull(
            client_id=self._client_id,
            client_secret=self._client_secret,
            token_endpoint_auth_method=self._method(),
            grant_types=["authorization_code", "refresh_token"],
        )


def _variable(
    environ: Mapping[str, str], name: str | None, where: str, key: str
) -> str | None:
    if name is None:
        return None
    value = environ.get(name)
    if not value:
        raise ConfigurationError(
            f"{where}.{key}: the environment variable {name} is not set"
        )
    return value


def _private_key(path: Path, where: str) -> tuple[str, str]:
    """The key file's PEM text and the algorithm its type signs with by default."""
    problem = f"{where}.private_key_file: cannot read a PEM private key from it"
    try:
        text = path.read_text(encoding="ascii")
        key = load_pem_private_key(text.encode(), password=None)
    except (OSError, ValueError, TypeError, UnicodeDecodeError):
        raise ConfigurationError(problem) from None
    if isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name in _CURVES:
        return text, _CURVES[key.curve.name]
    if isinstance(key, rsa.RSAPrivateKey):
        return text, "RS256"
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return text, "EdDSA"
    raise ConfigurationError(f"{where}.private_key_file: the key's type cannot sign")
