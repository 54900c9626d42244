"""memcached: AsyncMemcachedLock against a raw asyncio stream sending the same commands.

No maintained asyncio memcached client speaks the meta commands with CAS, so the
floor is the least a program can do over `asyncio.open_connection`: write the same
three commands of a cycle (`add`, `mg ... v c`, `md ... C<cas>`) on one reused
connection and read each reply with `readuntil`/`readexactly`, with no pool, no
timeout and no holding bookkeeping.
"""

from __future__ import annotations

import os
from contextlib import AsyncExitStack
from typing import Any

from async_locks import AsyncCase, lock_cycle, unique

MEMCACHED = os.environ.get("FIREFLY_TEST_MEMCACHED_URL", "memcached://127.0.0.1:11211")


async def cases(stack: AsyncExitStack) -> list[AsyncCase]:
    import asyncio  # noqa: PLC0415

    from firefly_scheduling_memcached import AsyncMemcachedLock  # noqa: PLC0415
    from firefly_scheduling_memcached.url import memcached_server  # noqa: PLC0415

    lock = AsyncMemcachedLock(MEMCACHED)
    stack.push_async_callback(lock.aclose)
    reader, writer = await asyncio.open_connection(*memcached_server(MEMCACHED))

    async def close() -> None:
        writer.close()
        await writer.wait_closed()

    stack.push_async_callback(close)
    key = ("firefly:scheduling:lock:" + unique("mc-raw")).encode()

    async def floor() -> None:
        token = os.urandom(16).hex().encode()
        writer.write(b"add %s 0 31 %d\r\n%s\r\n" % (key, len(token), token))
        if await reader.readuntil(b"\r\n") != b"STORED\r\n":
            raise RuntimeError("raw memcached did not win")
        writer.write(b"mg %s v c\r\n" % key)
        header = (await reader.readuntil(b"\r\n")).split()
        value = (await reader.readexactly(int(header[1]) + 2))[:-2]
        if value != token:
            raise RuntimeError("raw memcached lost its item")
        cas = header[2][1:]
        writer.write(b"md %s C%s\r\n" % (key, cas))
        if await reader.readuntil(b"\r\n") != b"HD\r\n":
            raise RuntimeError("raw memcached did not delete")

    return [
        AsyncCase("memcached", "AsyncMemcachedLock", "adapter", lock_cycle(lock, unique("mc"))),
        AsyncCase("memcached", "raw asyncio streams", "floor", floor),
    ]


def pair() -> tuple[Any, Any]:
    from firefly_scheduling_memcached import AsyncMemcachedLock, MemcachedLock  # noqa: PLC0415

    return (lambda: AsyncMemcachedLock(MEMCACHED)), (lambda: MemcachedLock(MEMCACHED))
