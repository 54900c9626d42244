"""A scanned module with one `async def` task due every minute, for the `tick` CLI test."""

from __future__ import annotations

import asyncio

from firefly_async_unit_tasks import _record

from firefly_scheduling import scheduled


@scheduled(cron="* * * * *", lock=True)
async def every_minute() -> None:
    await asyncio.sleep(0.01)
    _record("every_minute")
