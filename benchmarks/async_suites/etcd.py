"""etcd: AsyncEtcdLock against raw httpx.AsyncClient sending the same JSON-gateway calls."""

from __future__ import annotations

import os
from contextlib import AsyncExitStack
from typing import Any

from async_locks import AsyncCase, lock_cycle, unique

ETCD = os.environ.get("FIREFLY_TEST_ETCD_URL", "etcd://127.0.0.1:2379")


async def cases(stack: AsyncExitStack) -> list[AsyncCase]:
    import httpx  # noqa: PLC0415 - optional benchmark dependency

    from firefly_scheduling_etcd import AsyncEtcdLock, protocol  # noqa: PLC0415
    from firefly_scheduling_etcd.messages import Reply  # noqa: PLC0415
    from firefly_scheduling_etcd.url import parse_url  # noqa: PLC0415

    lock = AsyncEtcdLock(ETCD)
    stack.push_async_callback(lock.aclose)
    member = parse_url(ETCD)
    client = httpx.AsyncClient(base_url=member.base_url, trust_env=False)
    stack.push_async_callback(client.aclose)

    async def pump(operation: Any) -> Any:
        """The same calls the adapter sends, with no holding bookkeeping around them."""
        try:
            call = next(operation)
            while True:
                response = await client.post(call.path, content=call.body)
                call = operation.send(Reply(response.status_code, response.content))
        except StopIteration as finished:
            return finished.value

    name = unique("etcd-floor")

    async def floor() -> None:
        owner = unique("owner")
        if await pump(protocol.acquire(name, owner, 30.0)) is None:
            raise RuntimeError("raw etcd did not win")
        await pump(protocol.release(owner))

    return [
        AsyncCase("etcd", "AsyncEtcdLock", "adapter", lock_cycle(lock, unique("etcd"))),
        AsyncCase("etcd", "raw httpx.AsyncClient", "floor", floor),
    ]


def pair() -> tuple[Any, Any]:
    from firefly_scheduling_etcd import AsyncEtcdLock, EtcdLock  # noqa: PLC0415

    return (lambda: AsyncEtcdLock(ETCD)), (lambda: EtcdLock(ETCD))
