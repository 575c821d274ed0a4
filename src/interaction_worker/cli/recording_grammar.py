"""The grammar of the commands that record bus traffic and replay it: record and replay."""

from pathlib import Path
from typing import TYPE_CHECKING

from .arguments import (
    common_options,
    duration,
    families,
    positive_float,
    positive_int,
)

if TYPE_CHECKING:
    from .parser import AddCommand


def add_recording_commands(command: "AddCommand") -> None:
    record = command(
        "record",
        "record the bus traffic of a prefix to a file (JSON Lines), for replay in tests",
    )
    record.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="FILE",
        help="the recording to write, - for stdout; an existing FILE is replaced only by a "
        "recording that ends well",
    )
    record.add_argument(
        "--subject",
        action="append",
        default=[],
        metavar="SUBJ",
        help="a subject to record, repeatable (default: P.>)",
    )
    record.add_argument(
        "--count", type=positive_int, metavar="N", help="stop after N messages"
    )
    record.add_argument(
        "--duration",
        type=duration,
        metavar="D",
        help="stop after D (a duration such as 500ms, 30s, 15m, 1h or 2d)",
    )
    record.add_argument(
        "--stream",
        metavar="NAME",
        help="read history from this JetStream stream instead, then stop",
    )
    record.add_argument(
        "--since",
        metavar="TIME",
        help="with --stream: from TIME (RFC 3339, or a duration ago such as 15m)",
    )
    common_options(record, client_side=True)

    replay = command(
        "replay",
        "publish a recording's events again, or with --requests send its requests to the "
        "serving worker and compare the outcomes",
    )
    replay.add_argument("file", type=Path, help="a recording made by `record`")
    replay.add_argument(
        "--speed",
        type=positive_float,
        metavar="X",
        help="events: keep the recorded gaps divided by X (default: as fast as possible)",
    )
    replay.add_argument(
        "--only",
        type=families,
        metavar="KINDS",
        help="events: only these families, comma-separated: tool,mcp,output,command,dead",
    )
    replay.add_argument(
        "--requests",
        action="store_true",
        help="send the recorded requests instead of publishing the events",
    )
    replay.add_argument(
        "--compare",
        action="store_true",
        help="requests: compare each outcome with the recorded one; differences on stdout",
    )
    replay.add_argument(
        "--id-suffix",
        metavar="S",
        help="requests: append S to every call and delivery id (a ledger runs them afresh)",
    )
    replay.add_argument(
        "--concurrency",
        type=positive_int,
        default=16,
        metavar="N",
        help="requests: at most N in flight (16)",
    )
    replay.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="PATH",
        help="requests: a field left out of the comparison, dotted, * for any key "
        "(metadata.*.at); repeatable",
    )
    replay.add_argument(
        "--no-progress",
        action="store_true",
        help="requests: no progress bar, even on a terminal",
    )
    common_options(
        replay,
        client_side=True,
        prefix_help="publish under this prefix (default: the recording's)",
    )
