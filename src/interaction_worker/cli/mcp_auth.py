"""`mcp login`, `mcp logout` and `mcp status`: signing in to the MCP servers behind OAuth
(docs/configuration.md, "MCP servers behind OAuth"; docs/cli.md).

The tokens go where the workers read them: with a NATS URL (`--nats-url`, `INTERACTION_NATS_URL` or
the file's `nats.url`), the key-value bucket on that server; without one, `<data_dir>/mcp-auth/`.
"""

import argparse
import asyncio
import os
import sys
import webbrowser
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime

from ..client.target import Project, connect, find_project, resolve_target
from ..config import Settings
from ..config.loading import NATS_URL_ENV
from ..mcp.auth import ServerAuth, TokenPlace, TokenStoreError, tokens_of, wanted_scope
from ..mcp.auth.login import SignInError, sign_in, sign_out
from .output import UsageError, emit
from .parser import EXIT_FAILED, EXIT_OK

_CLIENT_NAME = "interaction-worker-mcp-login"


def login(args: argparse.Namespace) -> int:
    async def run() -> int:
        async with _server_auth(args, args.server) as auth:
            if not auth.signs_in:
                raise UsageError(
                    f"mcp.servers.{args.server}: type {auth.settings.type} needs no sign-in: "
                    "the worker fetches its tokens itself"
                )
            try:
                signed = await sign_in(
                    auth,
                    show=_shower(open_browser=args.open),
                    pasted=_read_pasted if args.no_browser else None,
                )
            except (SignInError, TokenStoreError) as error:
                print(
                    f"interaction-worker: cannot sign in to {args.server}: {error}",
                    file=sys.stderr,
                )
                return EXIT_FAILED
        if not signed.asked:
            print(
                f"{args.server} let every request through: nothing to sign in to",
                file=sys.stderr,
            )
            return EXIT_OK
        scopes = " ".join(signed.scopes) or "none named"
        print(f"signed in to {args.server} (scopes: {scopes})", file=sys.stderr)
        return EXIT_OK

    return asyncio.run(run())


def logout(args: argparse.Namespace) -> int:
    async def run() -> int:
        async with _server_auth(args, args.server) as auth:
            try:
                out = await sign_out(auth)
            except TokenStoreError as error:
                print(f"interaction-worker: {error}", file=sys.stderr)
                return EXIT_FAILED
        if not out.had_tokens:
            said = "no tokens were stored"
        elif out.revoked:
            said = "its tokens revoked"
        elif out.can_revoke:
            said = "the server did not confirm the revocation"
        else:
            said = "the server offers no revocation"
        print(f"signed out of {args.server} ({said})", file=sys.stderr)
        return EXIT_OK

    return asyncio.run(run())


def status(args: argparse.Namespace) -> int:
    """One JSON line per server with `auth:`: signed in or not, scopes, expiry; never a token."""

    async def run() -> int:
        project = _project(args)
        servers = {
            name: server
            for name, server in project.settings.mcp.servers.items()
            if server.auth is not None
        }
        async with _place(args, project) as place:
            for name, server in servers.items():
                assert server.auth is not None
                try:
                    record = await place.store.read(name) or {}
                except TokenStoreError as error:
                    print(f"interaction-worker: {error}", file=sys.stderr)
                    return EXIT_FAILED
                emit(_state(name, server.auth.type, record))
        return EXIT_OK

    return asyncio.run(run())


def _state(name: str, kind: str, record: dict[str, object]) -> dict[str, object]:
    tokens = tokens_of(record)
    state: dict[str, object] = {"server": name, "type": kind}
    state["signedIn"] = tokens is not None
    if tokens is not None:
        state["scopes"] = (tokens.scope or "").split()
        expires = record.get("expires_at")
        if isinstance(expires, int | float):
            state["expiresAt"] = datetime.fromtimestamp(expires, UTC).isoformat(
                timespec="seconds"
            )
        state["refreshable"] = tokens.refresh_token is not None
    wanted = wanted_scope(record)
    if wanted is not None:
        state["wantedScopes"] = wanted.split()
    return state


def _project(args: argparse.Namespace) -> Project:
    return find_project(args.config, env=os.environ, data_dir=args.data_dir)


def _nats_url(args: argparse.Namespace, settings: Settings) -> str | None:
    return args.nats_url or os.environ.get(NATS_URL_ENV) or settings.nats.url


@asynccontextmanager
async def _place(
    args: argparse.Namespace, project: Project
) -> AsyncIterator[TokenPlace]:
    """The token place the workers use: files without a NATS URL, else its bucket."""
    settings = project.settings
    if _nats_url(args, settings) is None:
        yield TokenPlace(directory=project.data_dir / "mcp-auth")
        return
    place = TokenPlace(replicas=settings.idempotency.replicas)
    target = resolve_target(project, os.environ, nats_url=args.nats_url)
    client = await connect(target, name=_CLIENT_NAME)
    try:
        place.bind(client)
        yield place
    finally:
        await client.close()


@asynccontextmanager
async def _server_auth(
    args: argparse.Namespace, server: str
) -> AsyncIterator[ServerAuth]:
    project = _project(args)
    settings = project.settings.mcp.servers.get(server)
    if settings is None or settings.auth is None or settings.url is None:
        raise UsageError(
            f"mcp.servers.{server}: no HTTP server of that name with auth: in the configuration"
        )
    async with _place(args, project) as place:
        yield ServerAuth(server, settings.url, settings.auth, place, os.environ)


def _shower(*, open_browser: bool) -> Callable[[str], Awaitable[None]]:
    async def show(url: str) -> None:
        print(f"sign in at: {url}", file=sys.stderr, flush=True)
        if open_browser:
            await asyncio.to_thread(webbrowser.open, url)

    return show


async def _read_pasted() -> str:
    print(
        "then paste the address the browser was sent to:", file=sys.stderr, flush=True
    )
    line: str = await asyncio.to_thread(sys.stdin.readline)
    if not line:
        await (
            asyncio.Event().wait()
        )  # stdin closed: the loopback callback may still come
    return line
