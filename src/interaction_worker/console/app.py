"""The console's web application: the page, its event stream (SSE), the form's two requests, and the
token exchange of a remote console.

Every route but the page's static files and `/login` needs the cookie when the console is remote
(access.py); every answer carries a Content-Security-Policy that lets the page run only its own
script, so that nothing an event carries can run as code even if it reached the document.
"""

import json
import urllib.parse
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..client import ConnectionLost, InteractionRequestError, NoWorkerError
from .access import COOKIE, Access, same_origin
from .bus import BusFeed, NotConnected
from .hub import Hub

MAX_REQUEST_BYTES = 256 * 1024
_STATIC = ("interaction_worker.console", "static")
_SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        b"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]
Endpoint = Callable[[Request], Awaitable[Response]]
# A POST of the page, given its body parsed.
JsonEndpoint = Callable[[Request, Any], Awaitable[Response]]


class _Guard:
    """Refuses a request whose `Host` is not the console's (access.py) and adds the security headers
    to every answer."""

    def __init__(self, app: ASGIApp, access: Access) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        if not self.access.host_allowed(host):
            response = JSONResponse(
                _error("FORBIDDEN", "Host is not this console"), 403
            )
            await response(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, secured)


# What a request from the page can end in besides its answer: each shown to the page as an error.
REQUEST_FAILURES = (
    NotConnected,
    ConnectionLost,
    NoWorkerError,
    InteractionRequestError,
    TimeoutError,
)


def _error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def console_app(hub: Hub, feed: BusFeed, access: Access) -> ASGIApp:
    """The application over `hub` (what the pages read) and `feed` (what the form sends through)."""

    def authenticated(endpoint: Endpoint) -> Endpoint:
        async def checked(request: Request) -> Response:
            if not access.authenticated(request.cookies.get(COOKIE)):
                return JSONResponse(_error("UNAUTHORIZED", "log in at /login"), 401)
            return await endpoint(request)

        return checked

    def changing(endpoint: JsonEndpoint) -> Endpoint:
        """A POST of the page: its own origin, a JSON body of bounded size (413 past it, 400 for a
        body that is not JSON), handed to `endpoint` parsed."""

        async def checked(request: Request) -> Response:
            host = request.headers.get("host")
            if not same_origin(request.headers.get("origin"), host, request.url.scheme):
                return JSONResponse(_error("FORBIDDEN", "cross-origin request"), 403)
            if request.headers.get("sec-fetch-site", "same-origin") != "same-origin":
                return JSONResponse(_error("FORBIDDEN", "cross-site request"), 403)
            if (
                request.headers.get("content-type", "").split(";")[0].strip()
                != "application/json"
            ):
                return JSONResponse(
                    _error("INVALID_INPUT", "the body must be JSON"), 415
                )
            body = await _read(request)
            if body is None:
                return _too_large()
            try:
                value = json.loads(body)
            except ValueError:
                return JSONResponse(
                    _error("INVALID_JSON", "the body is not valid JSON"), 400
                )
            return await endpoint(request, value)

        return authenticated(checked)

    async def page(request: Request) -> Response:
        if not access.authenticated(request.cookies.get(COOKIE)):
            return RedirectResponse("/login", 303)
        return RedirectResponse("/static/index.html", 303)

    async def login(request: Request) -> Response:
        if not access.remote:
            return RedirectResponse("/", 303)
        if request.method == "GET":
            return RedirectResponse("/static/login.html", 303)
        origin = request.headers.get("origin")
        if origin is not None and not same_origin(
            origin, request.headers.get("host"), request.url.scheme
        ):
            return JSONResponse(_error("FORBIDDEN", "cross-origin request"), 403)
        body = await _read(request)
        if body is None:
            return _too_large()
        token = urllib.parse.parse_qs(body.decode("utf-8", "replace")).get(
            "token", [""]
        )
        cookie = access.exchange(token[0])
        if cookie is None:
            return RedirectResponse("/static/login.html?failed=1", 303)
        response = RedirectResponse("/", 303)
        response.set_cookie(
            COOKIE,
            cookie,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return response

    async def events(request: Request) -> Response:
        return StreamingResponse(
            hub.stream(request.headers.get("last-event-id")),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def tools(request: Request) -> Response:
        try:
            found = await feed.client.list_tools()
        except REQUEST_FAILURES as error:
            return _failure(error)
        return JSONResponse({"tools": [t.to_wire() for t in found]})

    async def call(request: Request, body: Any) -> Response:
        if not isinstance(body, dict) or not isinstance(body.get("name"), str):
            return JSONResponse(_error("INVALID_INPUT", "name must be a string"), 400)
        arguments = body.get("arguments", {})
        call_id = body.get("id") or None
        if not isinstance(arguments, dict) or not isinstance(call_id, str | None):
            return JSONResponse(
                _error("INVALID_INPUT", "arguments must be an object, id a string"), 400
            )
        try:
            outcome = await feed.client.call_tool(
                body["name"], arguments, call_id=call_id
            )
        except REQUEST_FAILURES as error:
            return _failure(error)
        return JSONResponse(
            {
                "result": outcome.result.to_wire(),
                "observation": outcome.observation.to_wire(),
            }
        )

    async def deliver(request: Request, body: Any) -> Response:
        if not isinstance(body, dict) or not isinstance(body.get("text"), str):
            return JSONResponse(_error("INVALID_INPUT", "text must be a string"), 400)
        delivery: dict[str, Any] = {
            "message": {
                "role": body.get("role") or "assistant",
                "content": body["text"],
            }
        }
        delivery["deliveryId"] = body.get("id") or str(uuid.uuid4())
        try:
            receipt = await feed.client.deliver(delivery)
        except REQUEST_FAILURES as error:
            return _failure(error)
        return JSONResponse({"receipt": receipt.to_wire()})

    app = Starlette(
        routes=[
            Route("/", page),
            Route("/login", login, methods=["GET", "POST"]),
            Route("/events", authenticated(events)),
            Route("/api/tools", authenticated(tools)),
            Route("/api/call", changing(call), methods=["POST"]),
            Route("/api/deliver", changing(deliver), methods=["POST"]),
            Mount("/static", StaticFiles(packages=[_STATIC]), name="static"),
        ]
    )
    return _Guard(app, access)


def _failure(error: Exception) -> Response:
    if isinstance(error, InteractionRequestError):
        # The worker answered: the request went through, its refusal is the answer.
        return JSONResponse(_error(error.code, error.message))
    if isinstance(error, NotConnected | ConnectionLost):
        return JSONResponse(_error("NOT_CONNECTED", str(error)), 503)
    if isinstance(error, NoWorkerError):
        return JSONResponse(_error("NO_WORKER", str(error)), 503)
    return JSONResponse(_error("TIMEOUT", str(error) or "no reply in time"), 504)


def _too_large() -> Response:
    return JSONResponse(
        _error("TOO_LARGE", f"the body is larger than {MAX_REQUEST_BYTES // 1024} KiB"),
        413,
    )


async def _read(request: Request) -> bytes | None:
    """The body, or None past `MAX_REQUEST_BYTES` (read no further than that; not at all when its
    Content-Length says so)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and (len(declared) > 9 or int(declared) > MAX_REQUEST_BYTES):
        return None
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_REQUEST_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
