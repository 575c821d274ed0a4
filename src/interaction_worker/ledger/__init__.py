"""The idempotency ledger (wire.md 8): a retried call never runs its side effect twice, or is
answered `unknown` when that cannot be known. A state machine over an injected key-value store;
the bus bindings give it a JetStream bucket."""

from .claim import Claim
from .counted import CountedStore
from .ledger import FingerprintMismatch, Ledger, Recorded, StillRunning
from .records import RECORD_ENVELOPE, CorruptRecord, Encoded, Record, fingerprint
from .store import Conflict, Entry, KeyValueStore, MemoryStore, StoreUnavailable
from .waiting import Waiting, WaitingWrites

__all__ = [
    "RECORD_ENVELOPE",
    "Claim",
    "Conflict",
    "CorruptRecord",
    "CountedStore",
    "Encoded",
    "Entry",
    "FingerprintMismatch",
    "KeyValueStore",
    "Ledger",
    "MemoryStore",
    "Record",
    "Recorded",
    "StillRunning",
    "StoreUnavailable",
    "Waiting",
    "WaitingWrites",
    "fingerprint",
]
