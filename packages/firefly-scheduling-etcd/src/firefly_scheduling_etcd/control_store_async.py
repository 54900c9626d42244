"""`AsyncEtcdControlStore`: control records as etcd keys, over the v3 JSON gateway.

Each record is the key `<prefix>/control/<kind>/<record key>` (no lease: records
last until removed). A pause is a put, a trigger, backfill or schedule a
create-if-absent transaction (`create_revision == 0`), a resume or a take a
delete-range whose `deleted` count is 1 for exactly one of any number of racing
callers (etcd applies writes one at a time), a listing a range read of the kind's
prefix. Every read is linearizable (the gateway's default), so a pause written
through one member is seen by the next read through any other.

etcd has no clock a client can read: times are this host's wall clock. Written
once, for asyncio; `control_store.py` is generated from it by
`tools/async_to_sync.py`.
"""

# async-to-sync: rename AsyncEtcdControlStore EtcdControlStore
# async-to-sync: rename AsyncControlStore ControlStore
# async-to-sync: rename AsyncGatewayConnection GatewayConnection
# async-to-sync: rename firefly_scheduling_etcd.asyncio_gateway firefly_scheduling_etcd.gateway

from __future__ import annotations

import asyncio  # sync: import threading
import base64
from typing import Any, Final

from firefly_scheduling.control.records import RecordKind
from firefly_scheduling.control.store_async import AsyncControlStore
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling_etcd.asyncio_gateway import AsyncGatewayConnection
from firefly_scheduling_etcd.messages import EtcdServerError, b64, call, ok
from firefly_scheduling_etcd.url import parse_url

#: The key prefix when none is given; the lock's keys are under `<it>/lock/`.
DEFAULT_PREFIX: Final = "firefly/scheduling"


class AsyncEtcdControlStore(AsyncControlStore):
    """Control records as etcd keys, shared by every process that reaches the cluster.

    `url` is a URL the etcd lock accepts; `prefix` keeps two deployments sharing a
    cluster apart. One connection, one request at a time: operator commands and one
    pause check per claim are rare next to the lock's traffic. Construction does not
    connect.
    """

    store_name = "etcd"
    driver_errors = (*AsyncGatewayConnection.errors, EtcdServerError)

    def __init__(self, url: str, *, prefix: str = DEFAULT_PREFIX) -> None:
        if not prefix or prefix.endswith("/"):
            raise ConfigurationError(
                f"an etcd control store's prefix must be non-empty and not end with '/', "
                f"got {prefix!r}"
            )
        member = parse_url(url)
        super().__init__(target=member.shown)
        self._prefix = prefix
        self._connection = AsyncGatewayConnection(member, member.ssl_context())
        self._mutex = asyncio.Lock()  # sync: self._mutex = threading.Lock()

    def kind_prefix(self, kind: RecordKind) -> bytes:
        """The prefix of every key of `kind`."""
        return f"{self._prefix}/control/{kind}/".encode()

    async def _put(self, kind: RecordKind, key: str, value: str) -> None:
        await self._post("kv/put", {"key": self._key(kind, key), "value": b64(value.encode())})

    async def _add(self, kind: RecordKind, key: str, value: str) -> bool:
        server_key = self._key(kind, key)
        transaction = {
            "compare": [
                {"key": server_key, "target": "CREATE", "result": "EQUAL", "create_revision": "0"}
            ],
            "success": [{"request_put": {"key": server_key, "value": b64(value.encode())}}],
        }
        return bool((await self._post("kv/txn", transaction)).get("succeeded", False))

    async def _get(self, kind: RecordKind, key: str) -> str | None:
        found = (await self._post("kv/range", {"key": self._key(kind, key)})).get("kvs", [])
        return _value(found[0]) if found else None

    async def _delete(self, kind: RecordKind, key: str) -> bool:
        answer = await self._post("kv/deleterange", {"key": self._key(kind, key)})
        return int(answer.get("deleted", 0)) == 1

    async def _values(self, kind: RecordKind) -> list[str]:
        prefix = self.kind_prefix(kind)
        answer = await self._post(
            "kv/range", {"key": b64(prefix), "range_end": b64(_after(prefix))}
        )
        return [_value(item) for item in answer.get("kvs", [])]

    async def _close(self) -> None:
        await self._connection.aclose()

    def _key(self, kind: RecordKind, key: str) -> str:
        return b64(self.kind_prefix(kind) + key.encode())

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        async with self._mutex:
            return ok(await self._connection.post(call(path, body)))


def _value(item: dict[str, Any]) -> str:
    return base64.b64decode(item.get("value", "")).decode("utf-8")


def _after(prefix: bytes) -> bytes:
    """The end of the range of keys starting with `prefix` (its last byte plus one)."""
    return prefix[:-1] + bytes([prefix[-1] + 1])


def create_control_store(url: str) -> AsyncEtcdControlStore:
    """The control-store factory of this provider's descriptor, of this flavour."""
    return AsyncEtcdControlStore(url)
