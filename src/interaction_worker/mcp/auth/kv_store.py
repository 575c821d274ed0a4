"""Tokens in the key-value bucket `interaction_mcp_auth`, shared by a fleet (docs/configuration.md).

The bucket keeps one revision per key (history 1) and no expiry: tokens stay until `mcp logout` or
the next sign-in replaces them. The refresh lease is the key `<key>.refresh`, created only if absent
(so one worker holds it), holding the time it runs out; a holder that died is overtaken once that
time has passed, with a compare-and-set on the revision seen, so two waiters never both take it.
"""

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import api
from nats.js.kv import KeyValue

from .stores import LEASE_SECONDS, TokenStoreError, decode, encode, store_key

BUCKET = "interaction_mcp_auth"
_POLL = 0.05
_STREAM_NAME_IN_USE = 10058
_FAILURES = (nats.errors.Error, asyncio.TimeoutError, OSError)


class KvTokenStore:
    """Records in a JetStream key-value bucket, created on first use with `replicas`."""

    def __init__(
        self,
        client: Client,
        *,
        bucket: str = BUCKET,
        replicas: int = 1,
        timeout: float = 5.0,
    ) -> None:
        self.client = client
        self.bucket = bucket
        self.replicas = replicas
        self.timeout = timeout
        self._kv: KeyValue | None = None
        self._opening = asyncio.Lock()

    async def _bucket(self) -> KeyValue:
        if self._kv is not None:
            return self._kv
        async with self._opening:
            if self._kv is None:
                try:
                    self._kv = await self._create_or_bind()
                except _FAILURES:
                    raise TokenStoreError(
                        f"cannot open the key-value bucket {self.bucket}"
                    ) from None
            return self._kv

    async def _create_or_bind(self) -> KeyValue:
        js = self.client.jetstream(timeout=self.timeout)
        try:
            return await js.key_value(self.bucket)
        except nats.js.errors.BucketNotFoundError:
            pass
        config = api.KeyValueConfig(
            bucket=self.bucket, history=1, replicas=self.replicas
        )
        try:
            return await js.create_key_value(config)
        except nats.js.errors.BadRequestError as err:
            if err.err_code != _STREAM_NAME_IN_USE:
                raise
            return await js.key_value(self.bucket)  # another process made it first

    async def read(self, server: str) -> dict[str, Any] | None:
        kv = await self._bucket()
        try:
            entry = await kv.get(store_key(server))
        except nats.js.errors.KeyNotFoundError:
            return None
        except _FAILURES:
            raise TokenStoreError(
                f"cannot read the stored tokens of MCP server {server}"
            ) from None
        return None if not entry.value else decode(entry.value, server)

    async def write(self, server: str, record: dict[str, Any]) -> None:
        kv = await self._bucket()
        try:
            await kv.put(store_key(server), encode(record))
        except _FAILURES:
            raise TokenStoreError(
                f"cannot store the tokens of MCP server {server}"
            ) from None

    async def delete(self, server: str) -> None:
        kv = await self._bucket()
        try:
            await kv.purge(store_key(server))
        except _FAILURES:
            raise TokenStoreError(
                f"cannot remove the stored tokens of MCP server {server}"
            ) from None

    async def revision(self, server: str) -> object:
        try:
            kv = await self._bucket()
            entry = await kv.get(store_key(server))
        except (nats.js.errors.KeyNotFoundError, TokenStoreError, *_FAILURES):
            return None
        return entry.revision if entry.value else None

    def lease(self, server: str) -> AbstractAsyncContextManager[None]:
        return self._lease(server)

    @asynccontextmanager
    async def _lease(self, server: str) -> AsyncIterator[None]:
        kv = await self._bucket()
        key = f"{store_key(server)}.refresh"
        deadline = time.monotonic() + LEASE_SECONDS
        revision: int | None = None
        while revision is None and time.monotonic() < deadline:
            revision = await self._take(kv, key)
            if revision is None:
                await asyncio.sleep(_POLL)
        try:
            yield
        finally:
            if revision is not None:
                try:
                    await kv.delete(key, last=revision)
                except (nats.js.errors.KeyWrongLastSequenceError, *_FAILURES):
                    pass  # overtaken, or the bucket is away: the lease runs out by itself

    async def _take(self, kv: KeyValue, key: str) -> int | None:
        """The lease's revision once taken; None while another holder's lease runs."""
        value = json.dumps({"until": time.time() + LEASE_SECONDS}).encode()
        try:
            return await kv.create(key, value)
        except nats.js.errors.KeyWrongLastSequenceError:
            pass
        except _FAILURES:
            raise TokenStoreError("cannot take the refresh lease") from None
        try:
            entry = await kv.get(key)
        except nats.js.errors.KeyNotFoundError:
            return None  # released meanwhile: the next round creates it
        except _FAILURES:
            raise TokenStoreError("cannot take the refresh lease") from None
        held = decode(entry.value or b"", key) if entry.value else None
        until = held.get("until") if held else None
        if isinstance(until, int | float) and until > time.time():
            return None
        try:
            return await kv.update(key, value, last=entry.revision)
        except nats.js.errors.KeyWrongLastSequenceError:
            return None
        except _FAILURES:
            raise TokenStoreError("cannot take the refresh lease") from None
