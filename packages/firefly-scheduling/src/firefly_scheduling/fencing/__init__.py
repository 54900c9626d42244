"""Guarded writes: a resource that refuses a write stamped with an older fencing token.

A task body reads its token as `current_fire().token` (a plain-lock user gets it from
`lock.try_acquire_fenced`). It is strictly greater than every earlier holding's token
of that lock name on that backend, so a resource that stores the token of the last
write and refuses a smaller one shuts out a holder whose lock lapsed while it was
paused. An equal token is accepted: one holding may run two bodies.

* `fenced_update(session, table, where, values, token, column="fence_token")` and
  `afenced_update(...)`: SQLAlchemy, one parametrised UPDATE (`sql_statement`);
* `fenced_set(client, key, value, token)` and `afenced_set(...)`: Redis and Redis
  Cluster, one Lua script on one hash key (`redis_script`);
* Django: `firefly_scheduling.contrib.django.fencing`.

Importing this package imports neither SQLAlchemy nor redis: each helper's module is
loaded the first time its name is looked up here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from firefly_scheduling.fencing.token import FencingTokenError

if TYPE_CHECKING:
    from firefly_scheduling.fencing.redis_set import fenced_set
    from firefly_scheduling.fencing.redis_set_async import afenced_set
    from firefly_scheduling.fencing.sql_update import fenced_update
    from firefly_scheduling.fencing.sql_update_async import afenced_update

_LAZY = {
    "fenced_update": "firefly_scheduling.fencing.sql_update",
    "afenced_update": "firefly_scheduling.fencing.sql_update_async",
    "fenced_set": "firefly_scheduling.fencing.redis_set",
    "afenced_set": "firefly_scheduling.fencing.redis_set_async",
}

__all__ = ["FencingTokenError", "afenced_set", "afenced_update", "fenced_set", "fenced_update"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
