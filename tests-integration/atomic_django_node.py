"""A Django process running one fire whose body uses `current_fire().atomic(using=...)`.

Run by `test_atomic_outcome_django.py` as a process of its own, so Django's settings
(configured here, once) never meet another test's. The body writes its application
row with Django's cursor inside the block; `mode` says what else happens there:
`commit` (nothing), `raise` (the body raises inside the block) or `stale` (a second
history client adopts the fire inside the block, as an adopter's start does). The
process prints the fire's verdict and the error the block raised, as JSON.
"""

from __future__ import annotations

import json
import os
from datetime import datetime

import django
from django.conf import settings

from atomic_clients import adopted_by_node_b
from firefly_scheduling import current_fire
from firefly_scheduling.fires.outcome import Fire
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling_database import DatabaseLeaseLock
from firefly_scheduling_database.sql_history.store import SqlRunHistory


def main() -> None:
    orders = json.loads(os.environ["FIREFLY_ATOMIC_DJANGO"])
    if orders["django"]["ENGINE"] == "django.db.backends.mysql":
        import pymysql  # noqa: PLC0415 - Django's MySQL backend through PyMySQL

        pymysql.install_as_MySQLdb()  # the test environment has PyMySQL, not mysqlclient
    settings.configure(DATABASES={"default": orders["django"]}, INSTALLED_APPS=[], USE_TZ=True)
    django.setup()
    from django.db import connection  # noqa: PLC0415 - after Django's setup

    history = SqlRunHistory(orders["url"], table=orders["history_table"])
    adopter = SqlRunHistory(orders["url"], table=orders["history_table"])
    raised: list[str] = []

    def body() -> None:
        running = current_fire()
        assert running is not None
        try:
            with running.atomic(using="default"):
                if orders["mode"] == "stale":
                    assert running.token is not None
                    adopted_by_node_b(adopter, running, token=running.token + 1)
                with connection.cursor() as cursor:
                    cursor.execute(
                        f"INSERT INTO {orders['app_table']} (fire, attempt) VALUES (%s, %s)",
                        [running.idempotency_key, running.attempt],
                    )
                if orders["mode"] == "raise":
                    raise ValueError("the task changed its mind")
        except Exception as err:
            raised.append(type(err).__name__)
            raise

    target = orders["target"]
    descriptor = ScheduledDescriptor(target=target, lock_name=target, fixed_rate=1.0)
    lock = DatabaseLeaseLock(orders["lock_url"], table=orders["lock_table"])
    instant = datetime.fromisoformat(orders["instant"])
    result = FireRunner(lock, history=history, node="A").run(Fire.at(descriptor, instant), body)
    print(json.dumps({"verdict": result.verdict.value, "raised": raised}))
    adopter.close()
    history.close()


if __name__ == "__main__":
    main()
