"""`AttemptCounter`: how many attempts to acquire a lock instance made, counted in process.

An attempt is one round trip of the backend's acquisition hooks (`_acquire`,
`_acquire_fenced`; within a wait, `_acquire_in_turn` where the server queues the
waiters), or one wait on the server (`_acquire_within`). The waiting
contract reads it to prove a waiter slept on a notification rather than polled, and
`benchmarks/waiting.py` to measure the requests a waiter sends while it waits.
Works on either flavour: the count is taken when a hook is called.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: The hooks each attempt goes through (see `locks.backend_hooks_async`).
ATTEMPT_HOOKS = ("_acquire", "_acquire_fenced", "_acquire_within", "_acquire_in_turn")


class AttemptCounter:
    """Counts the attempts of one lock instance, by wrapping its hooks on the instance."""

    def __init__(self, lock: Any, *, hooks: Sequence[str] = ATTEMPT_HOOKS) -> None:
        self.count = 0
        for hook in hooks:
            original = getattr(lock, hook)

            def counted(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
                self.count += 1
                return _original(*args, **kwargs)

            setattr(lock, hook, counted)
