"""One guarded-write attempt of the effects tasks, recorded in its own transaction.

The attempt reads the token its guarded row holds, tries `fenced_update` with the
fire's token, and appends both and the outcome to the guarded-writes table, all in
one transaction. Rule 6 (`effects_rules`) judges the outcome against the token read,
so that read must hold the row's write lock until the commit: no newer write may
come between it and the `fenced_update` (`effects_tables.task_engine` sees to it on
SQLite, which has no `FOR UPDATE`).
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from firefly_scheduling.fencing import fenced_update


@dataclass(frozen=True)
class Attempt:
    """Who tries to write the guarded row `name`, with which token, and the value."""

    name: str
    task: str
    instant: str
    attempt: int
    token: int | None
    value: str


def guarded_attempt(
    engine: Engine, guarded: sa.Table, writes: sa.Table, attempt: Attempt
) -> tuple[int | None, bool]:
    """Try `attempt` and record it; the token the row held before it, and whether it wrote."""
    with engine.begin() as connection:
        found = sa.select(guarded.c.fence_token).where(guarded.c.name == attempt.name)
        previous = connection.execute(found.with_for_update()).scalar_one()
        written = fenced_update(
            connection,
            guarded,
            guarded.c.name == attempt.name,
            {"value": attempt.value},
            attempt.token,
        )
        connection.execute(
            sa.insert(writes).values(
                name=attempt.name,
                task=attempt.task,
                instant=attempt.instant,
                attempt=attempt.attempt,
                token=attempt.token,
                previous=previous,
                written=written,
            )
        )
    return previous, written
