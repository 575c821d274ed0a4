"""MCP servers behind OAuth, served on a real nats-server (docs/configuration.md): a worker whose
server has no tokens starts, counts it down (/readyz says why, interaction_mcp_server_up 0) and
answers MCP_UNAUTHORIZED, with the ledger's claim released; a sign-in lets the server up without a
restart. Then no token, secret, code or verifier shows in any log line, reply, event, dead letter,
metric or `check-config` output, after a sign-in, a refresh and a failure."""

import asyncio
import io
import json
import logging
import urllib.request
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, redirect_stdout
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import nats
import pytest
from bus_harness import Bus, Serve, decode, reply_prefixes, unique_prefix
from mcp_oauth_server import CLIENT_ID, CLIENT_SECRET, OAuthServer, oauth_server

from interaction_worker.app import build_worker
from interaction_worker.cli.main import main
from interaction_worker.config import parse_settings
from interaction_worker.mcp.auth import ServerAuth, TokenPlace
from interaction_worker.mcp.auth.login import SignInError, sign_in
from interaction_worker.service import ServeOptions, serve

pytest_plugins = ["bus_fixtures"]


async def person(url: str) -> None:
    """The person's browser (urllib, which logs nothing: the test greps the product's logs)."""

    def follow() -> None:
        with urllib.request.urlopen(url, timeout=10) as answer:
            answer.read()

    asyncio.get_running_loop().create_task(asyncio.to_thread(follow))


def forger(states: list[str]) -> Callable[[str], Awaitable[None]]:
    """A redirect that does not belong to the sign-in: the right callback, another state."""

    async def show(url: str) -> None:
        query = parse_qs(urlsplit(url).query)
        states.append(query["state"][0])
        callback = query["redirect_uri"][0] + "?code=forged&state=forged"
        await person(callback)

    return show


def settings_for(nats_url: str, url: str, names: dict[str, str], bucket: str) -> Any:
    servers: dict[str, Any] = {
        names["docs"]: {"transport": "http", "url": url, "auth": {"type": "oauth"}},
        names["extra"]: {
            "transport": "http",
            "url": url,
            "required": False,
            "auth": {"type": "oauth"},
        },
        names["machine"]: {
            "transport": "http",
            "url": url,
            "required": False,
            "auth": {
                "type": "client_credentials",
                "client_id_env": "TEST_MACHINE_ID",
                "client_secret_env": "TEST_MACHINE_SECRET",
                "issuer": url.removesuffix("/mcp"),
            },
        },
    }
    return parse_settings(
        {
            "nats": {"url": nats_url},
            "sandbox": {"mcp": list(servers)},
            "mcp": {"servers": servers},
            "output": {"sinks": []},
            "idempotency": {"enabled": True, "bucket": bucket},
            "metrics": {"listen": "127.0.0.1:0"},
        },
        base_dir=Path.cwd(),
    )


@asynccontextmanager
async def served(settings: Any, nats_url: str) -> AsyncIterator[tuple[Bus, str]]:
    prefix = unique_prefix()
    options = ServeOptions(
        url=nats_url,
        prefix=prefix,
        reply_prefixes=reply_prefixes(prefix),
        shutdown_grace=0.2,
        metrics_listen="127.0.0.1:0",
        idempotency=settings.idempotency,
    )
    ready, stop = asyncio.Event(), asyncio.Event()
    metrics: list[str] = []
    task = asyncio.create_task(
        serve(
            build_worker(settings),
            options,
            ready=lambda url: ready.set(),
            stop=stop,
            install_signal_handlers=False,
            metrics_listening=metrics.append,
        )
    )
    watcher = Serve("nats-py", nats_url)
    try:
        with anyio.fail_after(30):
            await ready.wait()
        yield await watcher.bus(nats_url, prefix), metrics[0]
    finally:
        stop.set()
        await watcher.close()
        await asyncio.wait({task})


def invoke(server: str, tool: str, call_id: str) -> dict[str, Any]:
    return {
        "operation": "invoke",
        "server": server,
        "call": {"id": call_id, "name": tool, "arguments": {"text": "x"}},
    }


async def test_a_server_without_tokens_answers_mcp_unauthorized_until_signed_in_and_leaks_nothing(
    nats_url: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("TEST_MACHINE_ID", CLIENT_ID)
    monkeypatch.setenv("TEST_MACHINE_SECRET", CLIENT_SECRET)
    tag = uuid.uuid4().hex[:6]
    names = {key: f"{key}-{tag}" for key in ("docs", "extra", "machine")}
    docs, extra, machine = names["docs"], names["extra"], names["machine"]
    bucket = f"ledger_{tag}"
    seen: list[str] = []
    states: list[str] = []
    async with oauth_server(lifetime=1) as (url, server):
        settings = settings_for(nats_url, url, names, bucket)
        async with served(settings, nats_url) as (bus, metrics):
            # Down, and saying why; the worker started all the same (docs is required).
            status, body = await readiness(metrics)
            assert status == 503
            assert (
                f"the required MCP server {docs} is down: "
                f"not signed in (interaction-worker mcp login {docs})"
            ) in body["reasons"]
            assert f'interaction_mcp_server_up{{server="{docs}"}} 0.0' in await text(
                metrics, "/metrics"
            )

            first = decode(await bus.request("mcp", invoke(docs, "read", "c-1")))
            error = first["result"]["error"]
            assert first["result"]["status"] == "failed"
            assert error == {
                "code": "MCP_UNAUTHORIZED",
                "message": f"MCP server {docs} is not signed in: "
                f"sign in with interaction-worker mcp login {docs}",
                "retryable": False,
            }
            refused = await bus.request(
                "mcp", {"operation": "discover", "server": docs}
            )
            assert refused.headers is not None
            assert refused.headers["Nats-Service-Error-Code"] == "401"
            assert decode(refused)["error"]["code"] == "MCP_UNAUTHORIZED"

            # The machine's client credentials need nobody.
            done = decode(await bus.request("mcp", invoke(machine, "read", "c-m")))
            assert done["result"]["status"] == "success"

            async with await nats.connect(nats_url) as client:
                place = TokenPlace()
                place.bind(client)
                auth = ServerAuth(docs, url, settings.mcp.servers[docs].auth, place, {})
                await sign_in(auth, show=person)

            # The claim was released: the same call id runs now, with no restart.
            again = decode(await bus.request("mcp", invoke(docs, "read", "c-1")))
            assert again["result"]["status"] == "success", again
            listing = decode(await bus.request("mcp", {"operation": "discover"}))
            assert listing["unavailable"] == [extra]
            assert await readiness(metrics) == (200, {"status": "ready"})

            await anyio.sleep(1.1)  # a refresh
            later = decode(await bus.request("mcp", invoke(docs, "read", "c-2")))
            assert later["result"]["status"] == "success"
            scoped = decode(await bus.request("mcp", invoke(docs, "write", "c-3")))
            assert scoped["result"]["error"]["code"] == "MCP_UNAUTHORIZED"
            server.revoke_all()  # a failure: the tokens are no longer usable
            gone = decode(await bus.request("mcp", invoke(docs, "read", "c-4")))
            assert gone["result"]["error"]["code"] == "MCP_UNAUTHORIZED"
            # A sign-in that fails: the redirect comes back with another state.
            async with await nats.connect(nats_url) as client:
                place = TokenPlace()
                place.bind(client)
                auth = ServerAuth(docs, url, settings.mcp.servers[docs].auth, place, {})
                with pytest.raises(SignInError):
                    await sign_in(auth, show=forger(states))
            seen.append(await text(metrics, "/metrics"))
            seen.append(await text(metrics, "/readyz"))
            seen += [m.data.decode() for m in bus.messages]
        assert any(r["grant_type"] == "refresh_token" for r in server.token_requests)
        config = tmp_path / "worker.yaml"
        config.write_text(json.dumps(_file(url)))
        printed = io.StringIO()
        with redirect_stdout(printed):
            assert main(["check-config", str(config)]) == 0
        seen.append(printed.getvalue())
    seen += [record.getMessage() for record in caplog.records]
    seen += [str(record.exc_info) for record in caplog.records if record.exc_info]
    assert any("OAuth flow error" in t for t in seen)
    leaks = [t for s in [*secrets_of(server), *states] for t in seen if s in t]
    assert leaks == []


def secrets_of(server: OAuthServer) -> list[str]:
    found = [*server.issued, CLIENT_SECRET]
    for request in server.token_requests:
        found += [
            request[k]
            for k in ("code", "code_verifier", "refresh_token")
            if k in request
        ]
    found += [a["state"] for a in server.authorizations]
    return found


def _file(url: str) -> dict[str, Any]:
    return {
        "mcp": {
            "servers": {
                "docs": {"transport": "http", "url": url, "auth": {"type": "oauth"}},
                "machine": {
                    "transport": "http",
                    "url": url,
                    "auth": {
                        "type": "client_credentials",
                        "client_id_env": "TEST_MACHINE_ID",
                        "client_secret_env": "TEST_MACHINE_SECRET",
                    },
                },
            }
        }
    }


async def readiness(base: str) -> tuple[int, dict[str, Any]]:
    async with httpx.AsyncClient(trust_env=False, timeout=5) as http:
        response = await http.get(f"{base}/readyz")
    return response.status_code, response.json()


async def text(base: str, path: str) -> str:
    async with httpx.AsyncClient(trust_env=False, timeout=5) as http:
        return (await http.get(f"{base}{path}")).text
