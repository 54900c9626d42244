"""PostgreSQL: a batch of the run history's writes as ONE statement over arrays.

psycopg parses the text of a multi-row statement again on every call, and a row's
values as parameters of their own cost CPU per row; one array per column makes a
catch-up, a batch of starts or a group of finishes one small statement of a fixed
text, whatever its size.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from firefly_scheduling.history.port import RunState
from firefly_scheduling_database.sql_history.schema import UtcDateTime

#: `finish_from_arrays`'s arrays, and the finish parameter each takes its values from.
FINISH_ARRAYS = (
    ("p_lock_names", "p_lock_name"),
    ("p_tasks", "p_task"),
    ("p_instants", "p_instant"),
    ("p_tokens", "p_token"),
    ("p_states", "p_state"),
    ("p_ended", "p_ended_at"),
    ("p_errors", "p_error"),
)


def skip_many_from_an_array(runs: sa.Table) -> sa.Executable:
    """`INSERT … SELECT … FROM unnest(:p_instants) ON CONFLICT DO NOTHING` (PostgreSQL).

    Every column but the instant is one value for the whole catch-up, so the
    statement carries one array instead of 9 parameters per row.
    """
    columns = runs.c
    catch_up = (
        sa.func.unnest(sa.bindparam("p_instants", type_=postgresql.ARRAY(UtcDateTime())))
        .table_valued("instant")
        .render_derived(name="catch_up")
    )
    rows = sa.select(
        sa.bindparam("p_lock_name", type_=columns.lock_name.type),
        sa.bindparam("p_task", type_=columns.task.type),
        catch_up.c.instant,
        sa.bindparam("p_node", type_=columns.node.type),
        sa.literal(1),
        sa.literal(RunState.SKIPPED.value),
        sa.null(),
        sa.bindparam("p_ended_at", type_=UtcDateTime()),
        sa.bindparam("p_error", type_=columns.error.type),
        sa.null(),
    )
    names = [*("lock_name", "task", "instant", "node", "attempt", "state")]
    names += ("started_at", "ended_at", "error", "token")
    insert = postgresql.insert(runs).from_select(names, rows).on_conflict_do_nothing()
    return insert.returning(columns.instant)  # the rows inserted: their number is the count


def start_new_from_arrays(runs: sa.Table) -> sa.ClauseElement:
    """`start_new_many` on PostgreSQL: one `INSERT … SELECT … FROM unnest(…)`.

    Each fire of the batch is a row of four arrays (lock, task, instant, token); it
    is inserted, attempt 1, unless its task has a `running` record (`NOT EXISTS`)
    or its fire a record (`ON CONFLICT DO NOTHING`), and the rows it returns are
    the runs started. One round trip for the whole batch, in autocommit.
    """
    columns = runs.c
    batch = (
        sa.func.unnest(
            sa.bindparam("p_lock_names", type_=postgresql.ARRAY(sa.Text())),
            sa.bindparam("p_tasks", type_=postgresql.ARRAY(sa.Text())),
            sa.bindparam("p_instants", type_=postgresql.ARRAY(sa.DateTime())),
            sa.bindparam("p_tokens", type_=postgresql.ARRAY(sa.BigInteger())),
        )
        .table_valued("lock_name", "task", "instant", "token")
        .render_derived(name="batch")
    )
    other = runs.alias("other")
    busy = (
        sa.select(sa.literal(1))
        .where(
            other.c.lock_name == batch.c.lock_name,
            other.c.task == batch.c.task,
            other.c.state == RunState.RUNNING.value,
        )
        .exists()
    )
    rows = sa.select(
        batch.c.lock_name,
        batch.c.task,
        batch.c.instant,
        sa.bindparam("p_node", type_=columns.node.type),
        sa.literal(1),
        sa.literal(RunState.RUNNING.value),
        sa.bindparam("p_started_at", type_=sa.DateTime()),
        sa.null(),
        sa.null(),
        batch.c.token,
    ).where(~busy)
    names = [*("lock_name", "task", "instant", "node", "attempt", "state")]
    names += ("started_at", "ended_at", "error", "token")
    insert = postgresql.insert(runs).from_select(names, rows).on_conflict_do_nothing()
    return insert.returning(columns.lock_name, columns.task, columns.instant)


def finish_from_arrays(runs: sa.Table) -> sa.ClauseElement:
    """A group of finishes on PostgreSQL: one `UPDATE … FROM unnest(…) RETURNING`.

    Each finish is a row of the arrays (`FINISH_ARRAYS`, and its place in the
    group); a record is updated on the single finish's conditions (running, and a
    token no newer than the finish's, or none for a token-less one), and the places
    returned are the finishes that matched.
    """
    columns = runs.c
    done = (
        sa.func.unnest(
            sa.bindparam("p_lock_names", type_=postgresql.ARRAY(sa.Text())),
            sa.bindparam("p_tasks", type_=postgresql.ARRAY(sa.Text())),
            sa.bindparam("p_instants", type_=postgresql.ARRAY(sa.DateTime())),
            sa.bindparam("p_tokens", type_=postgresql.ARRAY(sa.BigInteger())),
            sa.bindparam("p_states", type_=postgresql.ARRAY(sa.Text())),
            sa.bindparam("p_ended", type_=postgresql.ARRAY(sa.DateTime())),
            sa.bindparam("p_errors", type_=postgresql.ARRAY(sa.Text())),
            sa.bindparam("p_places", type_=postgresql.ARRAY(sa.Integer())),
        )
        .table_valued(
            "lock_name", "task", "instant", "token", "state", "ended_at", "error", "place"
        )
        .render_derived(name="done")
    )
    no_newer = sa.case(
        (done.c.token.is_(None), columns.token.is_(None)),
        else_=sa.or_(columns.token.is_(None), columns.token <= done.c.token),
    )
    return (
        runs.update()
        .where(
            columns.lock_name == done.c.lock_name,
            columns.task == done.c.task,
            columns.instant == done.c.instant,
            columns.state == RunState.RUNNING.value,
            no_newer,
        )
        .values(state=done.c.state, ended_at=done.c.ended_at, error=done.c.error)
        .returning(done.c.place)
    )
