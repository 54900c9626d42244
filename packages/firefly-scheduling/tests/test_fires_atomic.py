"""`current_fire().atomic` in core, without a server: what it costs and what it says.

The database-backed behaviour (commit, rollback, stale, killed node, refusals) is
proved on real servers in `tests-integration/test_atomic_*.py`; here: the import stays
light, the idempotency key is the fire's and nothing else, the default policy tells
the record stage about an outcome written in a transaction, and the stale error names
the fire.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime

from firefly_scheduling.fires.atomic import StaleFireError, idempotency_key
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.policy import DEFAULT_POLICY, IN_TRANSACTION, BodyEnded
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

INSTANT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

_PROBE = """
import json, sys
import firefly_scheduling
from firefly_scheduling import current_fire
from firefly_scheduling.fires.runner import FireRunner
drivers = ("sqlalchemy", "psycopg", "django", "pymysql", "aiosqlite")
print(json.dumps([d for d in drivers if d in sys.modules]))
"""


def test_importing_the_package_and_the_runner_imports_no_database_driver() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(done.stdout) == []


def test_the_idempotency_key_names_the_fire_and_nothing_else() -> None:
    key = idempotency_key("shop.billing:charge", INSTANT)
    assert key == "shop.billing:charge@2026-03-01T12:00:00+00:00"
    assert key == idempotency_key("shop.billing:charge", INSTANT)  # every attempt, every node
    assert key != idempotency_key("shop.billing:refund", INSTANT)
    assert key != idempotency_key("shop.billing:charge", INSTANT.replace(minute=1))


def ended(*, in_transaction: bool) -> BodyEnded:
    return BodyEnded(
        Verdict.SUCCEEDED, 1, 7, None, INSTANT, INSTANT, False, True, in_transaction=in_transaction
    )


def test_the_default_policy_tells_the_record_stage_of_an_outcome_in_a_transaction() -> None:
    fire = Fire.at(ScheduledDescriptor(target="t:job", lock_name="t", fixed_rate=1.0), INSTANT)
    assert DEFAULT_POLICY.at_record(fire, ended(in_transaction=True)) is IN_TRANSACTION
    assert DEFAULT_POLICY.at_record(fire, ended(in_transaction=False)) is None


def test_the_stale_error_names_the_task_instant_attempt_and_token() -> None:
    error = StaleFireError("shop.billing:charge", INSTANT, 2, 41)
    text = str(error)
    for part in ("shop.billing:charge", INSTANT.isoformat(), "attempt 2", "token 41"):
        assert part in text
    assert (error.target, error.instant, error.attempt, error.token) == (
        "shop.billing:charge",
        INSTANT,
        2,
        41,
    )
