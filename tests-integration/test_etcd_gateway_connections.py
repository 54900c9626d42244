"""Neither etcd lock routes its traffic through a proxy named by the environment.

The synchronous `EtcdLock` speaks HTTP/1.1 through `http.client` (`gateway`), the
asyncio one through httpx (`aio_gateway`), told not to read the environment. A
second client, the gateway over plain HTTP, checks what the member holds. (Their
reuse of kept-alive connections across a restart is in `test_etcd_faults`.)
"""

from __future__ import annotations

import asyncio
import base64
import uuid

import httpx
import pytest

from firefly_scheduling.testing.local_server import free_local_port
from firefly_scheduling_etcd import AsyncEtcdLock, EtcdLock
from firefly_scheduling_etcd.protocol import lock_key
from firefly_scheduling_etcd.url import parse_url


def stored_owner(base_url: str, name: str) -> str | None:
    """The owner token the member stores for `name`, read by a client of its own."""
    key = base64.b64encode(lock_key(name)).decode()
    with httpx.Client(base_url=base_url, timeout=5.0, trust_env=False) as client:
        kvs = client.post("/v3/kv/range", json={"key": key}).json().get("kvs", [])
    return base64.b64decode(kvs[0]["value"]).decode() if kvs else None


@pytest.mark.parametrize("flavour", ["sync", "asyncio"])
def test_proxy_variables_of_the_environment_are_never_used(
    etcd_url: str, monkeypatch: pytest.MonkeyPatch, flavour: str
) -> None:
    """A proxy on a closed port: a lock that used it could not reach the member at all."""
    dead_proxy = f"http://127.0.0.1:{free_local_port()}"
    for variable in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(variable, dead_proxy)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    name = f"gateway-{uuid.uuid4().hex[:8]}"
    base_url = parse_url(etcd_url).base_url
    if flavour == "sync":
        lock = EtcdLock(etcd_url)
        assert lock.try_acquire(name, 30)
        owner = stored_owner(base_url, name)
        lock.release(name)
        lock.close()
    else:

        async def held_then_released() -> str | None:
            lock = AsyncEtcdLock(etcd_url)
            assert await lock.try_acquire(name, 30)
            stored = stored_owner(base_url, name)
            await lock.release(name)
            await lock.aclose()
            return stored

        owner = asyncio.run(held_then_released())
    assert owner is not None, "the member never saw the acquisition"
    assert stored_owner(base_url, name) is None
