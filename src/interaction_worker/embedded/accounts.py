"""Who may use the embedded server (docs/configuration.md 3, "The embedded server"): two accounts, as
deploy/nats has them (docs/operations.md, "Permissions").

- `INTERACTION` holds the streams and the user `worker`, whose password is `<data_dir>/token`: every
  client of the data directory connects as `worker`, with all rights in its account.
- `UI` holds the user `ui`, whose password is `<data_dir>/ui-token`: a browser's. It imports the
  delivery subjects of the `nats` and `jetstream` sinks and the `jetstream` sinks' streams' direct
  gets, and may do nothing else: no request, no event, no consumer.

Two accounts rather than two users of one: within one account nothing checks a message's reply
subject, so a `ui` allowed one direct get could have the stream's answers published onto a ledger
key or an event subject, where a stream would store them. Across the import, the server replaces
the reply subject, and the answers reach the `UI` account only.

nats-server cannot hold a token beside a users list, hence the worker's token became a password. A
data directory of an earlier version, whose server kept its streams in the global account, has its
store moved to `INTERACTION` once (`adopt_global_store`).
"""

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .process import quote

WORKER_USER = "worker"
UI_USER = "ui"
WORKER_ACCOUNT = "INTERACTION"
UI_ACCOUNT = "UI"
# Replies to the UI's own requests (its direct gets) come under this prefix (nats.ws's `inboxPrefix`).
UI_INBOX_PREFIX = "_INBOX.UI"
# Where nats-server keeps the global account's JetStream data, and an account's, below its store_dir.
_GLOBAL_ACCOUNT = "$G"


@dataclass(frozen=True)
class BrowserAccess:
    """What the `ui` user may read: `subjects` to subscribe to (the sinks' delivery subjects, `*`
    for the delivery's key) and `streams` to read with direct gets (the `jetstream` sinks')."""

    subjects: tuple[str, ...] = ()
    streams: tuple[str, ...] = ()


def worker_credentials(token: str) -> dict[str, str]:
    """`nats.connect` options for a client of the data directory."""
    return {"user": WORKER_USER, "password": token}


def accounts_config(token: str, ui_token: str, access: BrowserAccess) -> str:
    """The server configuration's `accounts` block."""
    direct_gets = [f"$JS.API.DIRECT.GET.{stream}" for stream in access.streams]
    exports = [
        *(f"{{stream: {quote(s)}, accounts: [{UI_ACCOUNT}]}}" for s in access.subjects),
        *(
            f"{{service: {quote(s)}, response_type: stream, accounts: [{UI_ACCOUNT}]}}"
            for s in direct_gets
        ),
    ]
    source = f"account: {WORKER_ACCOUNT}"
    imports = [
        *(f"{{stream: {{{source}, subject: {quote(s)}}}}}" for s in access.subjects),
        *(f"{{service: {{{source}, subject: {quote(s)}}}}}" for s in direct_gets),
    ]
    subscribe = [*access.subjects, f"{UI_INBOX_PREFIX}.>"]
    # An empty allow list would allow everything: nothing to publish is a deny of all.
    publish = (
        f"allow: [{_list(quote(s) for s in direct_gets)}]"
        if direct_gets
        else f"deny: [{quote('>')}]"
    )
    return "\n".join(
        [
            "accounts {",
            f"  {WORKER_ACCOUNT} {{",
            "    jetstream: enabled",
            f"    users: [{{user: {WORKER_USER}, password: {quote(token)}}}]",
            f"    exports: [{_list(exports)}]",
            "  }",
            f"  {UI_ACCOUNT} {{",
            f"    imports: [{_list(imports)}]",
            f"    users: [{{user: {UI_USER}, password: {quote(ui_token)}, permissions: {{",
            f"      publish: {{{publish}}}",
            f"      subscribe: {{allow: [{_list(quote(s) for s in subscribe)}]}}",
            "    }}]",
            "  }",
            "}",
        ]
    )


def _list(items: Iterable[str]) -> str:
    return ", ".join(items)


def adopt_global_store(store_dir: Path) -> None:
    """Move the JetStream data that a server of an earlier version kept in the global account into
    the workers' account, once, while no server runs (the data directory is locked)."""
    jetstream = store_dir / "jetstream"
    old, new = jetstream / _GLOBAL_ACCOUNT, jetstream / WORKER_ACCOUNT
    if old.is_dir() and not new.exists():
        os.rename(old, new)
