"""Loading every installed descriptor imports no driver.

The store lookup and the messages read all installed descriptors; if that imported
each adapter's driver, every node would pay for all of them at start-up, and a
broken driver of an unused adapter would break the one in use.
"""

from __future__ import annotations

import json
import subprocess
import sys

DRIVERS = ("sqlalchemy", "redis", "httpx", "psycopg", "pymysql", "pymemcache")

_PROBE = f"""
import json, sys
from firefly_scheduling.providers.registry import installed_providers
names = [provider.name for provider in installed_providers()]
print(json.dumps([names, [d for d in {DRIVERS!r} if d in sys.modules]]))
"""


def test_loading_every_descriptor_imports_no_driver() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    names, imported = json.loads(done.stdout)
    assert {"postgres", "database", "redis", "memcached", "mysql", "etcd"} <= set(names)
    assert imported == []


def test_the_lock_classes_are_still_importable_from_the_packages() -> None:
    from firefly_scheduling_etcd import AsyncEtcdLock, EtcdLock  # noqa: PLC0415
    from firefly_scheduling_redis import RedisLock  # noqa: PLC0415

    assert (EtcdLock.__name__, AsyncEtcdLock.__name__, RedisLock.__name__) == (
        "EtcdLock",
        "AsyncEtcdLock",
        "RedisLock",
    )
