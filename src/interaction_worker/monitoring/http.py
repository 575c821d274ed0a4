"""uvicorn inside a process that owns its event loop and its signals: the metrics endpoints of a served
worker (`server.py`), the operator console and the MCP gateway serve their Starlette apps this way.

The listening socket is bound before uvicorn gets it: a busy port fails at once with one line, and the
bound address (port 0: any free port) is known before anything serves.
"""

import asyncio
import contextlib
import ipaddress
import socket
from collections.abc import Iterator

import uvicorn


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, IPv6 with or without brackets) is this machine only: the
    rule of every HTTP server of the package that serves loopback without a token."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class CannotListen(Exception):
    """The address cannot be listened on: `cannot listen on HOST:PORT: reason`."""


class ListenError(Exception):
    """A server of the package (the console, the gateway) cannot serve on the address asked for, or
    with the certificate given: one line saying why."""


class RemoteNotAllowed(Exception):
    """A server's options ask for what is not allowed: a non-loopback address without
    `--allow-remote`, or remote use without what it needs; one line naming the option."""


class LoopServer(uvicorn.Server):
    """uvicorn's server without its own signal handling (the process's owner stops it), with an
    event set once it listens."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.listening.set()


async def listen(host: str, port: int) -> socket.socket:
    """A socket listening on `host:port`.

    Raises:
        CannotListen: in use, not this machine's address, not an address.
    """
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    loop = asyncio.get_running_loop()
    try:
        found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        return socket.create_server((host, port), family=found[0][0])
    except OSError as error:
        reason = (error.strerror or type(error).__name__).lower()
        raise CannotListen(f"cannot listen on {where}: {reason}") from None


async def serving(server: LoopServer, sock: socket.socket) -> asyncio.Task[None]:
    """`server` serving on `sock` in a task, returned once it listens or has ended (it failed to
    start: `server.listening` is not set)."""
    task = asyncio.create_task(server.serve(sockets=[sock]))
    listening = asyncio.ensure_future(server.listening.wait())
    try:
        await asyncio.wait({task, listening}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        listening.cancel()
    return task


def url_of(sock: socket.socket, scheme: str = "http") -> str:
    """`http://HOST:PORT` (or `https://`) of a listening socket (an IPv6 host in brackets)."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}"
