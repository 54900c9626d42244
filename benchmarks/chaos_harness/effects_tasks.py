"""The `effects` setups' tasks (`--app chaos_harness.effects_tasks`): effects, not just runs.

Each fire of a task does two things to the database its run history lives in
(`FIREFLY_CHAOS_EFFECTS_URL`, reached through the node's proxy):

1. a **guarded write**, in a transaction of its own: the task lock's row of the
   guarded table is locked and its token read, `fenced_update` is tried with the
   fire's token, and the attempt (token, token found, written or not) is appended to
   the guarded-writes table in the same transaction;
2. an **effect**: one row inserted into the effects table inside
   `current_fire().atomic(session)`, so it commits with the fire's success or not
   at all.

The body stamps the evidence log as the other chaos tasks do (`start`, `end`), and
announces each phase of its work (`block`: `guarding` before its guarded write,
`inside` once its effect row is sent, `committing` once the block has written the
success and the commit is next, `committed`, or `failed`). The two lingering tasks
(`effect_a`, `effect_b`) linger a little in the first three, so that the nemesis,
which reads these stamps, can aim a SIGKILL, a SIGSTOP or the end of the session at
them (`effects_nemesis`); the three quick ones (`effect_c` to `effect_e`) linger
nowhere and make the volume, so that a full run judges its rules over thousands of
fires.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from chaos_harness.effects_guard import Attempt, guarded_attempt
from chaos_harness.effects_tables import tables, task_engine
from chaos_harness.evidence import EvidenceLog
from firefly_scheduling import current_fire, scheduled
from firefly_scheduling.fires.context import FireContext

PREFIX = os.environ.get("FIREFLY_CHAOS_PREFIX", "chaos")
#: Every task's lease: short, so a SIGSTOP of a few seconds outlives it.
LOCK_TTL = "1s"
#: Seconds between fires at pace 1, epoch-aligned.
RATES = {"effect_a": 1.0, "effect_b": 1.5, "effect_c": 0.2, "effect_d": 0.2, "effect_e": 0.2}
PACE = float(os.environ.get("FIREFLY_CHAOS_PACE", "1"))
#: How often a body's watch looks at `current_fire().lost`.
LOST_POLL_SECONDS = 0.02
#: The longest linger (seconds) inside an open block, stretched with the pace as the
#: rates are (the nemesis finds blocks open as often): SQLite's single writer is held
#: for all of it, so its setup asks for less.
DWELL = float(os.environ.get("FIREFLY_CHAOS_EFFECTS_DWELL", "0.3")) * PACE


def schedules(pace: float) -> dict[str, float]:
    """Every task's target and period at `pace`: the fires the checker expects."""
    return {f"{__name__}:{name}": rate * pace for name, rate in RATES.items()}


def _rate(name: str) -> float:
    return RATES[name] * PACE


def lock_of(prefix: str, name: str) -> str:
    """The lock of task `name` in the run named `prefix` (its guarded row's name too)."""
    return f"{prefix}-{name.replace('_', '-')}"


@cache
def _log() -> EvidenceLog:
    return EvidenceLog(Path(os.environ["FIREFLY_CHAOS_EVIDENCE"]))


@cache
def _engine() -> Engine:
    return task_engine(os.environ["FIREFLY_CHAOS_EFFECTS_URL"])


@cache
def _tables() -> tuple[sa.Table, sa.Table, sa.Table]:
    _, effects, guarded, writes = tables(PREFIX)
    return effects, guarded, writes


def _body(dwell: float) -> None:
    """The fire's guarded write and effect, lingering up to `dwell` seconds in each."""
    fire = current_fire()
    if fire is None or fire.lock_name is None:
        raise RuntimeError("an effects task ran outside a locked fire")
    fields: dict[str, Any] = {
        "node": fire.node,
        "target": fire.target,
        "lock": fire.lock_name,
        "instant": fire.instant.isoformat(),
        "attempt": fire.attempt,
        "token": fire.token,
    }
    _log().append("start", **fields)
    try:
        with _watching_lost(fire, fields):
            _guarded_write(fire, fields, dwell)
            _effect(fire, fields, dwell)
    except BaseException as err:
        _log().append("block", phase="failed", error=type(err).__name__, **fields)
        # The body's end all the same: the exclusion rule ends a run at its end event.
        _log().append("end", lost=fire.lost, raised=type(err).__name__, **fields)
        raise
    _log().append("end", lost=fire.lost, **fields)


@contextmanager
def _watching_lost(fire: FireContext, fields: dict[str, Any]) -> Iterator[None]:
    """While the block runs, a thread stamps `lost` the moment the fire's lock is lost,
    as a careful body whose work blocks on the database would watch it: a body stuck
    in a frozen session, then killed, would otherwise take that knowledge with it."""
    done = threading.Event()

    def watch() -> None:
        while not done.wait(LOST_POLL_SECONDS):
            if fire.lost:
                _log().append("lost", **fields)
                return

    watcher = threading.Thread(target=watch, name="effects-lost-watch", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


def _guarded_write(fire: FireContext, fields: dict[str, Any], dwell: float) -> None:
    """One `fenced_update` of the lock's guarded row, and its attempt appended."""
    _, guarded, writes = _tables()
    assert fire.lock_name is not None  # `_body` runs only in a locked fire
    _log().append("block", phase="guarding", **fields)
    _linger(dwell / 2)
    attempt = Attempt(
        fire.lock_name,
        fire.target,
        fields["instant"],
        fire.attempt,
        fire.token,
        f"{fields['instant']} attempt {fire.attempt} on {fire.node}",
    )
    previous, written = guarded_attempt(_engine(), guarded, writes, attempt)
    _log().append("guarded", previous=previous, written=written, **fields)


def _effect(fire: FireContext, fields: dict[str, Any], dwell: float) -> None:
    """The fire's effect row, committed with its success inside `atomic`."""
    effects, _, _ = _tables()
    with Session(_engine()) as session, session.begin():
        with fire.atomic(session):
            session.execute(
                sa.insert(effects).values(
                    task=fire.target,
                    instant=fields["instant"],
                    attempt=fire.attempt,
                    token=fire.token,
                    node=fire.node,
                )
            )
            _log().append("block", phase="inside", **fields)
            _linger(dwell)
        _log().append("block", phase="committing", **fields)
        _linger(dwell / 2)
    _log().append("block", phase="committed", **fields)


def _linger(longest: float) -> None:
    if longest > 0:
        time.sleep(random.uniform(0.0, longest))


@scheduled(fixed_rate=_rate("effect_a"), lock=lock_of(PREFIX, "effect_a"), lock_ttl=LOCK_TTL)
def effect_a() -> None:
    """One fire a second (at pace 1), each an effect and a guarded write."""
    _body(DWELL)


@scheduled(fixed_rate=_rate("effect_b"), lock=lock_of(PREFIX, "effect_b"), lock_ttl=LOCK_TTL)
def effect_b() -> None:
    """A fire every 1.5 s (at pace 1), each an effect and a guarded write."""
    _body(DWELL)


@scheduled(fixed_rate=_rate("effect_c"), lock=lock_of(PREFIX, "effect_c"), lock_ttl=LOCK_TTL)
def effect_c() -> None:
    """Five fires a second (at pace 1), lingering nowhere: with `effect_d` and
    `effect_e`, the volume of fires the rules judge."""
    _body(0.0)


@scheduled(fixed_rate=_rate("effect_d"), lock=lock_of(PREFIX, "effect_d"), lock_ttl=LOCK_TTL)
def effect_d() -> None:
    """Five fires a second (at pace 1), lingering nowhere."""
    _body(0.0)


@scheduled(fixed_rate=_rate("effect_e"), lock=lock_of(PREFIX, "effect_e"), lock_ttl=LOCK_TTL)
def effect_e() -> None:
    """Five fires a second (at pace 1), lingering nowhere."""
    _body(0.0)
