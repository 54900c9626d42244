"""`backend_problem`: whether the configured lock backend answers, for `monitor`.

`monitor` judges tasks from the run history, which Redis, etcd and memcached do not
keep, and which an unreachable database cannot be read from: a lock server that
went away was invisible to it there. It now asks the backend first, with the same
one-claim probe a host boots with (`hosts.runtime.probe`), and reports a backend that does
not answer, or refuses, as a problem of its own.
"""

from __future__ import annotations

from firefly_scheduling.errors import ConfigurationError, LockBackendError
from firefly_scheduling.hosts.runtime.probe import probe_backend
from firefly_scheduling.locks.providers import resolve_lock
from firefly_scheduling.settings import Settings

#: How `monitor` names the backend in its output.
BACKEND_TARGET = "lock backend"


def backend_problem(settings: Settings) -> str | None:
    """Why the configured lock backend cannot take fire claims now, or None if it can.

    A provider that cannot be built at all is a `ConfigurationError` (exit 2), as in
    every command; a backend that does not answer or refuses the claim is a problem.
    """
    lock = resolve_lock(settings)
    try:
        probe_backend(lock)
    except (LockBackendError, ConfigurationError) as err:
        return f"{lock!r}: {err}"
    finally:
        close = getattr(lock, "close", None)
        if callable(close):
            close()
    return None
