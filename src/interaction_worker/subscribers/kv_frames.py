"""The key-value writes of the ledger's store as JetStream frames them (docs/wire.md 8): the header
blocks of a write at a revision and of a delete marker, as nats-py's key-value layer encodes them,
and the sequence a PubAck gives the key. tests/test_acked_publish.py compares the blocks with what
nats-py's `publish` writes for the same headers.
"""


def expecting(revision: int) -> bytes:
    """The header block of a write at the key's `revision` (0: the key must be absent), as nats-py
    encodes `{"Nats-Expected-Last-Subject-Sequence": str(revision)}`."""
    return b"%s%d\r\n\r\n" % (_EXPECTING, revision)


def deleting(revision: int) -> bytes:
    """The header block of a delete marker at the key's `revision`, as nats-py's `kv.delete`
    encodes it."""
    return b"%s%d\r\n\r\n" % (_DELETING, revision)


_EXPECTING = b"NATS/1.0\r\nNats-Expected-Last-Subject-Sequence: "
_DELETING = b"NATS/1.0\r\nKV-Operation: DEL\r\nNats-Expected-Last-Subject-Sequence: "
ABSENT = expecting(0)


def acked_sequence(answer: bytes) -> int | None:
    """The sequence of a PubAck as the server writes a key-value write's, `{"stream":"KV_b",
    "seq":12}` (read without a JSON parser: a call makes two or three such writes); None for anything
    else (the store then reads it as JSON)."""
    head, found, tail = answer.rpartition(b'"seq":')
    if not found or not tail.endswith(b"}") or b'"error"' in head:
        return None
    try:
        return int(tail[:-1])
    except ValueError:
        return None
