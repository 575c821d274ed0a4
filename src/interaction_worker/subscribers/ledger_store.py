"""The idempotency ledger's store when workers share it: a JetStream key-value bucket, so every
worker on the server sees the same claims, and each compare-and-set is decided once, by the stream.

JetStream's revisions are the stream's sequence, which is what `MemoryStore` imitates; where nats-py
differs from that contract, this module hides it from the ledger. A call's writes (create, update
at a revision, delete at a revision) are publishes with JetStream's own headers
(`Nats-Expected-Last-Subject-Sequence`, `KV-Operation: DEL`) on `AckedPublisher`, acknowledged on
one reply subscription, not through nats-py's key-value layer and request machinery (about 200 µs
of client CPU a write, docs/benchmarks.md); reads and watches, off the hot path, stay nats-py's. nats-py reports a lost compare-and-set three ways (a typed error on
create and update, a bare API error on delete, a missing key when a create races an expiry) and an
unreachable server a dozen more: they come out as `Conflict` and `StoreUnavailable`. nats-py reads
a revision of 0 as "the key must be absent" and ignores it on delete, so a revision below 1, which
no entry has, is a `Conflict` before anything is sent.

The bucket is created or bound on first use. A bucket that exists with another TTL is updated to
the configured one, with a warning: a setting that differs from the configuration is never kept
silently.
"""

import asyncio
import json
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext, api
from nats.js.kv import KV_DEL, KV_PURGE, KeyValue

from ..ledger.store import Conflict, Entry, StoreUnavailable
from .acked_answers import WriteFailed
from .acked_publish import AckedPublisher
from .kv_frames import ABSENT, acked_sequence, deleting, expecting

_LOGGER = logging.getLogger("interaction_worker")
_BUCKET_NAME = re.compile(r"[A-Za-z0-9_-]+")
# JetStream's duplicate window, unless the TTL is shorter (the server wants it within max_age).
_DUPLICATE_WINDOW = 120.0
# The server's codes for a write whose expected last revision of the key is not the key's.
_WRONG_LAST_SEQUENCE = frozenset({10071, 10164})
# The server's code for a stream name in use with another configuration (a create that raced).
_STREAM_NAME_IN_USE = 10058
# Seconds the server keeps a watcher's ephemeral consumer after its subscription is gone.
_WATCHER_INACTIVE = 10.0


class JetStreamStore:
    """A `KeyValueStore` over the JetStream key-value bucket `bucket` (stream `KV_<bucket>`).

    Args:
        client: a connected nats-py client, which the store does not close; None until `bind`
            gives it one (a FastStream broker's connection is known only once it has connected).
        bucket: the bucket's name (letters, digits, `-` and `_`).
        ttl: seconds an entry is kept after its last write (the bucket's max age).
        replicas: the bucket's replicas when this store creates it.
        timeout: seconds each JetStream request is waited for before `StoreUnavailable`.
    """

    def __init__(
        self,
        client: Client | None,
        *,
        bucket: str,
        ttl: float,
        replicas: int = 1,
        timeout: float = 5.0,
        logger: logging.Logger = _LOGGER,
    ) -> None:
        if _BUCKET_NAME.fullmatch(bucket) is None:
            raise ValueError(f"bucket must be letters, digits, - and _, not {bucket!r}")
        if ttl <= 0:
            raise ValueError(f"ttl must be positive seconds, not {ttl!r}")
        if replicas < 1:
            raise ValueError(f"replicas must be at least 1, not {replicas!r}")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive seconds, not {timeout!r}")
        self.client: Client | None = None
        self.bucket = bucket
        self._subject = f"$KV.{bucket}."
        self.ttl = ttl
        self.replicas = replicas
        self.timeout = timeout
        self.logger = logger
        self._js: JetStreamContext | None = None
        self._kv: KeyValue | None = None
        self._writes: AckedPublisher | None = None
        self._opening = asyncio.Lock()
        if client is not None:
            self.bind(client)

    def bind(self, client: Client) -> None:
        """Use `client` from now on (the bucket is bound again on first use)."""
        if client is not self.client:
            self.client = client
            self._js = client.jetstream(timeout=self.timeout)
            self._writes = AckedPublisher(client, timeout=self.timeout)
            self._kv = None

    @property
    def stream(self) -> str:
        """The name of the bucket's stream."""
        return f"KV_{self.bucket}"

    async def open(self) -> None:
        """Create the bucket, or bind it and set its TTL to `ttl`; again, a no-op.

        Raises:
            StoreUnavailable: JetStream could not be reached or refused the bucket.
        """
        if self._kv is not None:
            return
        async with self._opening:
            if self._kv is not None:
                return
            if self._js is None:
                raise StoreUnavailable(
                    f"not connected: cannot open the idempotency ledger bucket {self.bucket}"
                )
            with self._unavailable(
                f"cannot open the idempotency ledger bucket {self.bucket}"
            ):
                self._kv = await self._create_or_bind()
            assert self._writes is not None  # set with _js
            try:
                await self._writes.open()
            except WriteFailed as failed:
                raise StoreUnavailable(
                    f"{failed.reason}: cannot open the idempotency ledger bucket {self.bucket}"
                ) from None

    async def get(self, key: str) -> Entry | None:
        kv = await self._bound()
        with self._unavailable(f"cannot read the ledger key {key}"):
            try:
                found = await kv.get(key)
            except (nats.js.errors.KeyNotFoundError, nats.js.errors.KeyDeletedError):
                return None
        return _entry(found)

    async def create(self, key: str, value: bytes) -> int:
        if self._kv is None:
            await self.open()
        try:
            # A key never written: one write. Over a delete marker (a released claim) the expected
            # revision is the marker's, which nats-py's create finds and retries with.
            subject = self._subject + key
            assert self._writes is not None  # bound by open
            sent = self._writes.write_nowait(subject, value, ABSENT)
            answer = await (sent or self._sent(subject, value, ABSENT))
            sequence = acked_sequence(answer)
            if sequence is not None:
                return sequence
            return self._revision(answer, key, "create")
        except Conflict:
            pass
        except WriteFailed as failed:
            raise self._failed(failed, key, "create") from None
        kv = await self._bound()
        with self._unavailable(f"cannot create the ledger key {key}"):
            try:
                return await kv.create(key, value)
            except (
                nats.js.errors.KeyWrongLastSequenceError,
                # nats-py re-reads a key that refused the create, to recreate it over a
                # delete marker: it is gone when its entry expired in between. The key was
                # present when the create was refused; the ledger reads it again.
                nats.js.errors.KeyNotFoundError,
            ):
                raise Conflict(key) from None

    async def update(self, key: str, value: bytes, revision: int) -> int:
        if revision < 1:
            raise Conflict(key)
        if self._kv is None:
            await self.open()
        subject = self._subject + key
        block = expecting(revision)
        assert self._writes is not None  # bound by open
        try:
            sent = self._writes.write_nowait(subject, value, block)
            answer = await (sent or self._sent(subject, value, block))
        except WriteFailed as failed:
            raise self._failed(failed, key, "update") from None
        sequence = acked_sequence(answer)
        if sequence is not None:
            return sequence
        return self._revision(answer, key, "update")

    async def delete(self, key: str, revision: int) -> None:
        if revision < 1:
            raise Conflict(key)
        if self._kv is None:
            await self.open()
        subject = self._subject + key
        block = deleting(revision)
        assert self._writes is not None  # bound by open
        try:
            sent = self._writes.write_nowait(subject, b"", block)
            answer = await (sent or self._sent(subject, b"", block))
        except WriteFailed as failed:
            raise self._failed(failed, key, "delete") from None
        self._revision(answer, key, "delete")

    async def _sent(self, subject: str, value: bytes, block: bytes) -> bytes:
        """The answer of a write `write_nowait` did not take (not connected, not opened).

        Raises:
            WriteFailed: it could not be sent.
        """
        writes = self._writes
        assert writes is not None  # bound by open
        try:
            return await (await writes.send_one(subject, value, block))
        except nats.errors.Error as failure:
            raise WriteFailed(self._reason(failure), sent=False) from None

    def _failed(self, failed: WriteFailed, key: str, action: str) -> StoreUnavailable:
        return StoreUnavailable(
            f"{failed.reason}: cannot {action} the ledger key {key}"
        )

    def _revision(self, answer: bytes, key: str, action: str) -> int:
        """The revision a write's answer gives the key.

        Raises:
            Conflict: the key was not at the expected revision.
            StoreUnavailable: JetStream refused the write otherwise.
        """
        sequence = acked_sequence(answer)
        if sequence is not None:
            return sequence
        try:
            ack = json.loads(answer)
        except ValueError:
            ack = None
        error = ack.get("error") if isinstance(ack, dict) else None
        if not isinstance(error, dict):
            raise StoreUnavailable(
                f"JetStream's answer is not a PubAck: cannot {action} the ledger key {key}"
            )
        code = error.get("err_code")
        if code in _WRONG_LAST_SEQUENCE:
            raise Conflict(key)
        said = error.get("description") or "no description"
        raise StoreUnavailable(
            f"JetStream refused the request ({said}, error {code}): cannot {action} "
            f"the ledger key {key}"
        )

    async def changed(
        self,
        key: str,
        revision: int,
        within: float,
    ) -> Entry | None:
        kv = await self._bound()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        with self._unavailable(f"cannot watch the ledger key {key}"):
            watcher = await kv.watch(key, inactive_threshold=_WATCHER_INACTIVE)
        try:
            # The watcher delivers the key's last entry (none when the key is absent), then the
            # marker None, then each write. The marker can overtake the entry, so an early
            # marker is checked with a read.
            seen = False
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise TimeoutError(
                        f"the ledger key {key} did not change within {within:g} s"
                    )
                try:
                    update = await watcher.updates(timeout=remaining)  # type: ignore[no-untyped-call]
                except nats.errors.TimeoutError:
                    raise TimeoutError(
                        f"the ledger key {key} did not change within {within:g} s"
                    ) from None
                if update is None:
                    if seen:
                        continue
                    seen = True
                    current = await self.get(key)
                    if current is None or current.revision != revision:
                        return current
                    continue
                seen = True
                if update.operation in (KV_DEL, KV_PURGE):
                    return None
                if update.revision != revision:
                    return _entry(update)
        finally:
            await self._stop(watcher)

    async def _bound(self) -> KeyValue:
        await self.open()
        assert self._kv is not None  # open's postcondition
        return self._kv

    async def _create_or_bind(self) -> KeyValue:
        js = self._js
        assert js is not None  # open's check
        try:
            info = await js.stream_info(self.stream)
        except nats.js.errors.NotFoundError:
            config = api.KeyValueConfig(
                bucket=self.bucket, ttl=self.ttl, history=1, replicas=self.replicas
            )
            try:
                return await js.create_key_value(config)
            except nats.js.errors.BadRequestError as err:
                if err.err_code != _STREAM_NAME_IN_USE:
                    raise
                # Another worker created it at the same moment, with other settings.
                info = await js.stream_info(self.stream)
        await self._apply_ttl(js, info)
        return await js.key_value(self.bucket)

    async def _apply_ttl(self, js: JetStreamContext, info: api.StreamInfo) -> None:
        kept = info.config.max_age or 0.0
        if round(kept * 1e9) == round(self.ttl * 1e9):
            return
        window = min(info.config.duplicate_window or _DUPLICATE_WINDOW, self.ttl)
        await js.update_stream(
            info.config.evolve(max_age=self.ttl, duplicate_window=window)
        )
        self.logger.warning(
            "the idempotency ledger bucket %s kept entries for %s: updated to the configured %g s",
            self.bucket,
            f"{kept:g} s" if kept else "ever",
            self.ttl,
        )

    async def _stop(self, watcher: KeyValue.KeyWatcher) -> None:
        try:
            await watcher.stop()  # type: ignore[no-untyped-call]
        except nats.errors.Error as err:
            # The connection is gone; so is the subscription, and the server drops the consumer.
            self.logger.debug("a ledger watcher did not unsubscribe: %r", err)

    @contextmanager
    def _unavailable(self, action: str) -> Iterator[None]:
        """Raise the client's failures as `StoreUnavailable`: `action`, and why."""
        try:
            yield
        except nats.js.errors.InvalidKeyError as err:
            raise ValueError(f"{action}: not a key-value key") from err
        except (nats.errors.Error, TimeoutError) as err:
            raise StoreUnavailable(f"{self._reason(err)}: {action}") from err

    def _reason(self, err: BaseException) -> str:
        if isinstance(err, nats.js.errors.ServiceUnavailableError):
            return "JetStream is not available on the server"
        if isinstance(
            err, nats.js.errors.NoStreamResponseError | nats.errors.NoRespondersError
        ):
            return "nothing on the server answered (JetStream is off, or the bucket is gone)"
        if isinstance(err, TimeoutError):
            return f"JetStream did not answer within {self.timeout:g} s"
        if isinstance(err, nats.errors.ConnectionClosedError):
            return "the NATS connection is closed"
        if isinstance(err, nats.errors.ConnectionReconnectingError):
            return "the NATS connection is reconnecting"
        if isinstance(err, nats.errors.OutboundBufferLimitError):
            return "the NATS client's outbound buffer is full"
        if isinstance(err, nats.js.errors.APIError):
            said = err.description or f"code {err.code}"
            return f"JetStream refused the request ({said}, error {err.err_code})"
        return f"the NATS client failed ({type(err).__name__})"


def _entry(found: KeyValue.Entry) -> Entry:
    assert found.revision is not None  # set on every entry read or watched
    return Entry(found.value or b"", found.revision)
