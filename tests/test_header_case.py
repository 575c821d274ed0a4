"""The package's own request headers are read in any case, the documented spelling first
(docs/wire.md 3); the account rule of `subjects.account_inboxes` holds whatever the case."""

import pytest

from interaction_worker.errors import InvalidInput
from interaction_worker.subscribers.incoming import (
    Incoming,
    account_reply_target,
    reply_target,
)
from interaction_worker.subscribers.requests.command import command_id

PREFIXES = ("_INBOX.",)
# Where a message's own reply subject may point (`own_prefixes`): `_R_.own` is allowed.
OWN = ("_INBOX.", "_R_.")


def incoming(headers: dict[str, str] | None) -> Incoming:
    return Incoming("p.tool.call", b"{}", headers, "_R_.own")


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        pytest.param({"Interaction-Reply-To": "_INBOX.a"}, "_INBOX.a", id="documented"),
        pytest.param({"interaction-reply-to": "_INBOX.a"}, "_INBOX.a", id="lower"),
        pytest.param({"INTERACTION-REPLY-TO": "_INBOX.a"}, "_INBOX.a", id="upper"),
        pytest.param(
            {"interaction-reply-to": "_INBOX.b", "Interaction-Reply-To": "_INBOX.a"},
            "_INBOX.a",
            id="documented-wins",
        ),
        pytest.param(
            {"interaction-reply-to": "_INBOX.b", "INTERACTION-REPLY-TO": "_INBOX.c"},
            "_INBOX.b",
            id="first-other-case",
        ),
        pytest.param({"traceparent": "00-1-2-01"}, "_R_.own", id="absent"),
        pytest.param(None, "_R_.own", id="no-headers"),
    ],
)
def test_the_reply_to_header_is_found_in_any_case(
    headers: dict[str, str] | None, expected: str
) -> None:
    assert reply_target(incoming(headers), PREFIXES, OWN) == (expected, None)


def test_a_reply_to_in_another_case_is_checked_as_the_documented_one() -> None:
    target, error = reply_target(
        incoming({"interaction-reply-to": "elsewhere"}), PREFIXES, OWN
    )
    assert target == "_R_.own"
    assert isinstance(error, InvalidInput)


def test_the_account_rule_applies_to_a_reply_to_in_another_case() -> None:
    """A lower-cased header must not slip past the check that reads the requesting account."""
    msg = incoming(
        {
            "interaction-reply-to": "_INBOX.AGENT_B.x.1",
            "Nats-Request-Info": '{"acc":"AGENT_A"}',
        }
    )
    target, error = account_reply_target(msg, PREFIXES, OWN)
    assert target == "_R_.own"
    assert isinstance(error, InvalidInput)
    own = incoming(
        {
            "INTERACTION-REPLY-TO": "_INBOX.AGENT_A.x.1",
            "Nats-Request-Info": '{"acc":"AGENT_A"}',
        }
    )
    assert account_reply_target(own, PREFIXES, OWN) == ("_INBOX.AGENT_A.x.1", None)


@pytest.mark.parametrize(
    "name",
    ["Interaction-Command-Id", "interaction-command-id", "INTERACTION-COMMAND-ID"],
)
def test_the_command_id_header_is_found_in_any_case(name: str) -> None:
    assert command_id(incoming({name: "k-1"})) == "k-1"
    with pytest.raises(InvalidInput, match="Interaction-Command-Id must be"):
        command_id(incoming({name: " "}))
