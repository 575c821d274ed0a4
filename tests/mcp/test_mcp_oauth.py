"""MCP servers behind OAuth (docs/configuration.md): a worker's connection without tokens is down and
refuses with MCP_UNAUTHORIZED's words, `mcp login`'s sign-in lets it up without a restart, a scope
the server wants is asked for at the next sign-in, and tokens are refreshed."""

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path

import anyio
import httpx2
import nats
import pytest
from mcp_oauth_server import oauth_server

from interaction_worker.cli.main import main
from interaction_worker.config.model import McpAuthSettings
from interaction_worker.errors import McpDenied, McpUnavailable
from interaction_worker.mcp import McpServerConnection, http_transport
from interaction_worker.mcp.auth import ServerAuth, TokenPlace
from interaction_worker.mcp.auth.login import sign_in, sign_out

pytestmark = pytest.mark.anyio
OAUTH = McpAuthSettings(type="oauth")


async def follow(url: str) -> None:
    """The person's browser: open the authorization URL and follow its redirect to the callback."""
    async with httpx2.AsyncClient(follow_redirects=True, timeout=10) as http:
        await http.get(url)


async def person(url: str) -> None:
    asyncio.get_running_loop().create_task(follow(url))


def auth_for(url: str, place: TokenPlace, name: str = "docs") -> ServerAuth:
    return ServerAuth(name, url, OAUTH, place, {})


def connection(url: str, auth: ServerAuth) -> McpServerConnection:
    return McpServerConnection(
        auth.server,
        http_transport(url, timeout=10.0, auth=auth.provider),
        timeout=10.0,
        backoff=(0.1, 0.5),
        connect_timeout=10.0,
        auth=auth,
    )


async def test_a_server_without_tokens_is_down_until_someone_signs_in(
    tmp_path: Path,
) -> None:
    async with oauth_server() as (url, server):
        place = TokenPlace(directory=tmp_path / "mcp-auth")
        auth = auth_for(url, place)
        async with connection(url, auth) as docs:  # required, yet the start goes on
            assert not docs.connected
            assert (
                docs.down_reason == "not signed in (interaction-worker mcp login docs)"
            )
            with pytest.raises(McpDenied) as refused:
                await docs.call_tool("read", {"text": "x"})
            assert refused.value.message == (
                "MCP server docs is not signed in: sign in with interaction-worker mcp login docs"
            )
            signed = await sign_in(auth_for(url, place), show=person)
            assert signed.scopes == ("read",)
            assert (tmp_path / "mcp-auth" / "docs.json").stat().st_mode & 0o777 == 0o600
            # No restart: the next call finds the tokens and waits for the session they allow.
            result = await docs.call_tool("read", {"text": "x"})
            assert result.content == [{"type": "text", "text": "read x"}]
            assert docs.connected
        assert server.authorizations[0]["code_challenge_method"] == "S256"
        assert server.authorizations[0]["resource"] == url


async def test_a_scope_the_server_wants_is_asked_for_at_the_next_sign_in(
    tmp_path: Path,
) -> None:
    async with oauth_server() as (url, server):
        place = TokenPlace(directory=tmp_path)
        await sign_in(auth_for(url, place), show=person)
        auth = auth_for(url, place)
        async with connection(url, auth) as docs:
            with pytest.raises(McpDenied) as refused:
                await docs.call_tool("write", {"text": "x"})
            assert refused.value.scope == "write"
            assert refused.value.message == (
                "MCP server docs needs the scope write: "
                "sign in with interaction-worker mcp login docs"
            )
            assert docs.connected  # a 403 for scope leaves the session up
            signed = await sign_in(auth_for(url, place), show=person)
            assert set(signed.scopes) == {"read", "write"}
            assert server.authorizations[-1]["scope"].split() == ["read", "write"]
            result = await docs.call_tool("write", {"text": "x"})
            assert result.content == [{"type": "text", "text": "wrote x"}]


async def test_the_worker_refreshes_its_tokens_itself(tmp_path: Path) -> None:
    async with oauth_server(lifetime=1) as (url, server):
        place = TokenPlace(directory=tmp_path)
        await sign_in(auth_for(url, place), show=person)
        async with connection(url, auth_for(url, place)) as docs:
            await anyio.sleep(1.2)
            result = await docs.call_tool("read", {"text": "later"})
            assert result.content == [{"type": "text", "text": "read later"}]
        grants = [r["grant_type"] for r in server.token_requests]
        assert grants[0] == "authorization_code"
        assert set(grants[1:]) == {"refresh_token"}
        assert server.reused == 0


async def test_logout_revokes_and_forgets(tmp_path: Path) -> None:
    async with oauth_server() as (url, server):
        place = TokenPlace(directory=tmp_path)
        await sign_in(auth_for(url, place), show=person)
        out = await sign_out(auth_for(url, place))
        assert (out.had_tokens, out.revoked) == (True, True)
        assert server.revocations == 2
        assert not (tmp_path / "docs.json").exists()


async def test_two_workers_whose_tokens_run_out_together_spend_the_refresh_token_once(
    nats_url: str,
) -> None:
    """The token endpoint revokes the whole sign-in when a spent refresh token comes back: without
    the lease, the second worker's refresh would end both workers' access."""
    bucket = f"auth_{uuid.uuid4().hex[:8]}"
    async with (
        oauth_server(lifetime=1) as (url, server),
        await nats.connect(nats_url) as one,
        await nats.connect(nats_url) as two,
    ):
        places = [TokenPlace(bucket=bucket), TokenPlace(bucket=bucket)]
        places[0].bind(one)
        places[1].bind(two)
        await sign_in(auth_for(url, places[0]), show=person)
        workers = [connection(url, auth_for(url, place)) for place in places]
        async with workers[0], workers[1]:
            for _ in range(2):
                await anyio.sleep(1.1)  # both workers' access tokens have run out
                results = await asyncio.gather(
                    *(w.call_tool("read", {"text": "x"}) for w in workers * 2)
                )
                assert all(
                    r.content == [{"type": "text", "text": "read x"}] for r in results
                )
        assert server.reused == 0
        refreshes = [
            r for r in server.token_requests if r["grant_type"] == "refresh_token"
        ]
        assert len(refreshes) >= 2


async def test_mcp_login_takes_a_pasted_redirect_and_status_and_logout_follow(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command line as a person on another machine uses it: the URL on stderr, the address the
    browser was sent to pasted back (`--no-browser`); then `mcp status` and `mcp logout`."""
    async with oauth_server() as (url, server):
        config = tmp_path / "worker.yaml"
        config.write_text(
            json.dumps(
                {
                    "data_dir": str(tmp_path / "data"),
                    "mcp": {
                        "servers": {
                            "docs": {
                                "transport": "http",
                                "url": url,
                                "auth": {"type": "oauth"},
                            }
                        }
                    },
                }
            )
        )
        reading, writing = os.pipe()
        monkeypatch.setattr(sys, "stdin", os.fdopen(reading))
        login = asyncio.create_task(
            asyncio.to_thread(
                main, ["mcp", "login", "docs", "--no-browser", "--config", str(config)]
            )
        )
        said = ""
        with anyio.fail_after(30):
            while "sign in at: " not in said:
                await anyio.sleep(0.05)
                said += capsys.readouterr().err
        address = said.split("sign in at: ", 1)[1].split()[0]
        async with (
            httpx2.AsyncClient() as http
        ):  # the browser elsewhere: it never reaches the callback
            sent_to = (await http.get(address)).headers["location"]
        os.write(writing, f"{sent_to}\n".encode())
        assert await login == 0
        assert capsys.readouterr().err.endswith("signed in to docs (scopes: read)\n")

        assert (
            await asyncio.to_thread(main, ["mcp", "status", "--config", str(config)])
            == 0
        )
        (line,) = capsys.readouterr().out.splitlines()
        state = json.loads(line)
        assert state.pop("expiresAt")
        assert state == {
            "server": "docs",
            "type": "oauth",
            "signedIn": True,
            "scopes": ["read"],
            "refreshable": True,
        }
        assert not any(token in line for token in server.issued)

        assert (
            await asyncio.to_thread(
                main, ["mcp", "logout", "docs", "--config", str(config)]
            )
            == 0
        )
        assert capsys.readouterr().err == "signed out of docs (its tokens revoked)\n"


async def test_a_server_that_refuses_static_headers_answers_with_the_same_refusal() -> (
    None
):
    async with oauth_server() as (url, _):
        transport = http_transport(
            url, headers={"Authorization": "Bearer stale"}, timeout=10.0
        )
        optional = McpServerConnection(
            "static",
            transport,
            required=False,
            backoff=(5.0, 5.0),
            connect_timeout=10.0,
        )
        async with optional:
            assert optional.down_reason == "the server refused the credentials"
            with pytest.raises(McpDenied) as refused:
                await optional.list_tools()
            assert (
                refused.value.message
                == "MCP server static refused the credentials (HTTP 401)"
            )
        required = McpServerConnection("static", transport, connect_timeout=10.0)
        with pytest.raises(McpUnavailable) as failed:
            await required.start()
        assert str(failed.value) == (
            "cannot connect to MCP server static: the server refused the credentials"
        )


async def test_a_token_the_server_says_has_run_out_is_refreshed_and_the_call_sent_again(
    tmp_path: Path,
) -> None:
    """The server's clock is ahead of the worker's (or it ended the token early): its 401 for a
    token the worker took for valid is cured by a refresh, not answered MCP_UNAUTHORIZED."""
    async with oauth_server() as (url, server):
        place = TokenPlace(directory=tmp_path)
        await sign_in(auth_for(url, place), show=person)
        async with connection(url, auth_for(url, place)) as docs:
            server.expire_access()
            result = await docs.call_tool("read", {"text": "x"})
            assert result.content == [{"type": "text", "text": "read x"}]
            assert docs.connected
        grants = [r["grant_type"] for r in server.token_requests]
        assert grants == ["authorization_code", "refresh_token"]
