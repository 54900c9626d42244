"""The key-value cases of `benchmarks/locks.py`: Redis, memcached and etcd.

Each backend gives its adapter, its floor (the raw client sending the adapter's own
commands or requests on one connection) and the peers that are installed.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

from lock_case import ETCD, MEMCACHED, REDIS, Case, lock_cycle, require, tooz_case, unique

# -- Redis --------------------------------------------------------------------------------


def redis_cases(stack: ExitStack) -> Iterator[Case]:
    import redis  # noqa: PLC0415

    from firefly_scheduling_redis import RedisLock  # noqa: PLC0415

    lock = RedisLock(REDIS)
    stack.callback(lock.close)
    yield Case("redis", "RedisLock", "adapter", lock_cycle(lock, unique("redis")))

    client = redis.Redis.from_url(REDIS)
    stack.callback(client.close)
    release = client.register_script(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
        "else return 0 end"
    )
    key = "firefly:scheduling:lock:" + unique("redis-raw")

    def floor() -> None:
        token = os.urandom(16).hex()
        require(bool(client.set(key, token, nx=True, px=30_000)), "uncontended cycle failed")
        release(keys=[key], args=[token])

    yield Case("redis", "redis-py: SET NX PX + EVALSHA", "floor", floor)

    redis_py_lock = client.lock(unique("redis-py-lock"), timeout=30)

    def redis_py_cycle() -> None:
        require(bool(redis_py_lock.acquire(blocking=False)), "uncontended cycle failed")
        redis_py_lock.release()

    yield Case("redis", "redis-py Lock", "peer", redis_py_cycle)

    try:
        import redis_lock  # noqa: PLC0415

        prl = redis_lock.Lock(client, unique("python-redis-lock"), expire=30)

        def prl_cycle() -> None:
            require(bool(prl.acquire(blocking=False)), "uncontended cycle failed")
            prl.release()

        yield Case("redis", "python-redis-lock", "peer", prl_cycle)
    except ImportError:
        pass
    yield from tooz_case(stack, "redis", REDIS)


# -- memcached ------------------------------------------------------------------------------


def memcached_cases(stack: ExitStack) -> Iterator[Case]:
    from firefly_scheduling_memcached import MemcachedLock  # noqa: PLC0415

    lock = MemcachedLock(MEMCACHED)
    stack.callback(lock.close)
    yield Case("memcached", "MemcachedLock", "adapter", lock_cycle(lock, unique("mc")))
    yield from memcached_floor(stack)
    yield from tooz_case(stack, "memcached", MEMCACHED)


def memcached_floor(stack: ExitStack) -> Iterator[Case]:
    from urllib.parse import urlsplit  # noqa: PLC0415

    from pymemcache.client.base import Client  # noqa: PLC0415

    parts = urlsplit(MEMCACHED)
    # The same socket options as the adapter (TCP_NODELAY, timeouts): only our code differs.
    client = Client(
        (parts.hostname or "127.0.0.1", parts.port or 11211),
        no_delay=True,
        default_noreply=False,
        connect_timeout=3.0,
        timeout=3.0,
    )
    stack.callback(client.close)
    key = "firefly:scheduling:lock:" + unique("mc-raw")

    def floor() -> None:
        token = os.urandom(16).hex().encode()
        require(bool(client.add(key, token, expire=30, noreply=False)), "uncontended cycle failed")
        value, cas = client.gets(key)
        require(bool(value == token), "uncontended cycle failed")
        # Compare-and-swap delete through the meta protocol: md <key> C<cas>
        client.raw_command(f"md {key} C{cas.decode()}".encode(), b"\r\n")

    yield Case("memcached", "pymemcache: add + gets + md C<cas>", "floor", floor)


# -- etcd ------------------------------------------------------------------------------------


def etcd_cases(stack: ExitStack) -> Iterator[Case]:
    """EtcdLock, and the same four requests sent raw with http.client, httpx and etcd3gw.

    A won cycle is a linearizable read of the key, a lease grant, the create-if-absent
    transaction and a lease revoke. The bodies are written out here, not taken from
    the adapter, so the floor is what a hand-written client would send. The floor is
    the standard library's `http.client`, the synchronous lock's own transport; httpx
    (the asyncio lock's) and etcd3gw are peers.
    """
    import base64  # noqa: PLC0415
    import http.client  # noqa: PLC0415
    import json  # noqa: PLC0415
    from urllib.parse import urlsplit  # noqa: PLC0415

    import httpx  # noqa: PLC0415

    from firefly_scheduling_etcd import EtcdLock  # noqa: PLC0415

    lock = EtcdLock(ETCD)
    stack.callback(lock.close)
    yield Case("etcd", "EtcdLock", "adapter", lock_cycle(lock, unique("etcd")))

    parts = urlsplit(ETCD)
    host, port = parts.hostname or "127.0.0.1", parts.port or 2379

    def requests_of(name: str) -> Callable[[], list[tuple[str, dict[str, Any]]]]:
        key = base64.b64encode(f"firefly/scheduling/lock/{name}".encode()).decode()

        def cycle_requests() -> list[tuple[str, dict[str, Any]]]:
            owner = os.urandom(16).hex()
            lease = str(random.getrandbits(62) + 1)
            create = {"key": key, "value": base64.b64encode(owner.encode()).decode()}
            absent = {"key": key, "target": "CREATE", "result": "EQUAL", "create_revision": "0"}
            return [
                ("kv/range", {"key": key, "count_only": True}),
                ("lease/grant", {"ID": lease, "TTL": "30"}),
                (
                    "kv/txn",
                    {
                        "compare": [absent],
                        "success": [{"request_put": {**create, "lease": lease}}],
                    },
                ),
                ("lease/revoke", {"ID": lease}),
            ]

        return cycle_requests

    connection = http.client.HTTPConnection(host, port, timeout=3.0)
    stack.callback(connection.close)
    plain_requests = requests_of(unique("etcd-http-client"))
    headers = {"Content-Type": "application/json"}

    def http_client_floor() -> None:
        for path, body in plain_requests():
            connection.request("POST", f"/v3/{path}", json.dumps(body), headers)
            answer = json.loads(connection.getresponse().read())
            if path == "kv/txn":
                require(answer.get("succeeded") is True, "uncontended cycle failed")

    yield Case("etcd", "http.client: range + grant + txn + revoke", "floor", http_client_floor)

    client = httpx.Client(base_url=f"http://{host}:{port}/v3/", timeout=3.0, trust_env=False)
    stack.callback(client.close)
    httpx_requests = requests_of(unique("etcd-httpx"))

    def httpx_cycle() -> None:
        for path, body in httpx_requests():
            answer = client.post(path, content=json.dumps(body)).json()
            if path == "kv/txn":
                require(answer.get("succeeded") is True, "uncontended cycle failed")

    yield Case("etcd", "httpx: range + grant + txn + revoke", "peer", httpx_cycle)

    try:
        import etcd3gw  # noqa: PLC0415
    except ImportError:
        return
    gateway = etcd3gw.client(host=host, port=port, timeout=3, api_path="/v3/")
    stack.callback(gateway.session.close)
    gateway_requests = requests_of(unique("etcd3gw"))

    def etcd3gw_cycle() -> None:
        for path, body in gateway_requests():
            answer = gateway.post(gateway.get_url(path), json=body)
            if path == "kv/txn":
                require(answer.get("succeeded") is True, "uncontended cycle failed")

    yield Case("etcd", "etcd3gw: range + grant + txn + revoke", "peer", etcd3gw_cycle)
