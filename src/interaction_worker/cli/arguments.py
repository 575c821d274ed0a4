"""The types of the command line's arguments and the options most commands share: each refuses a
value with the rule of docs/configuration.md (`argument --duration: must be a duration such as
500ms, 30s or 24h`), so the file and the command line read a value alike."""

import argparse
from pathlib import Path
from urllib.parse import urlsplit

from ..config.values import LISTEN_RULE, Rule, listen_address, parse_duration
from ..contracts.wire import EVENT_FAMILIES

NATS_SCHEMES = ("nats", "tls", "ws", "wss")


def nats_url(value: str) -> str:
    """A usage error for what cannot be a server's URL, before anything tries to dial it."""
    try:
        parts = urlsplit(value)
        valid = parts.scheme in NATS_SCHEMES and bool(parts.hostname)
        _ = parts.port
    except ValueError:
        valid = False
    if not valid or any(c.isspace() for c in value):
        raise argparse.ArgumentTypeError("must be a URL such as nats://127.0.0.1:4222")
    return value


def listen_at(value: str) -> str:
    if isinstance(listen_address(value), Rule):
        raise argparse.ArgumentTypeError(LISTEN_RULE.removesuffix(", or null"))
    return value


def positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError("must be a whole number of at least 1")
    return number


def port_number(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(
            "must be a port from 0 to 65535 (0: any free one)"
        )
    return number


def positive_float(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if not 0 < number < float("inf"):
        raise argparse.ArgumentTypeError("must be a number above 0")
    return number


def duration(value: str) -> float:
    seconds = parse_duration(value)
    if isinstance(seconds, Rule):
        raise argparse.ArgumentTypeError(seconds.text)
    return seconds


FAMILIES = EVENT_FAMILIES


def families(value: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in value.split(","))
    unknown = [name for name in names if name not in FAMILIES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"{', '.join(unknown) or value!r}: the families are {','.join(FAMILIES)}"
        )
    return names


def common_options(
    sub: argparse.ArgumentParser,
    *,
    client_side: bool,
    prefix_help: str = "the subject prefix (default: the file's)",
) -> None:
    sub.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="the YAML file (default: the nearest worker.yaml, if any)",
    )
    sub.add_argument(
        "--nats-url",
        metavar="URL",
        type=nats_url,
        help="connect here instead of the configured server",
    )
    sub.add_argument(
        "--data-dir",
        type=Path,
        metavar="DIR",
        help="the embedded server's directory"
        + (" (default: the nearest .interaction/)" if client_side else ""),
    )
    sub.add_argument("--debug", action="store_true", help="tracebacks on errors")
    if client_side:
        sub.add_argument("--prefix", metavar="P", help=prefix_help)
        sub.add_argument(
            "--timeout",
            type=positive_float,
            default=75.0,
            metavar="S",
            help="seconds to wait (75)",
        )
