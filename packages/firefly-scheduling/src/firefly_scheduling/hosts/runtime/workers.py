"""How many threads run a host's task bodies: `max_workers`, checked, or one per task.

Shared by the `run` and `tick` hosts (and their `--max-workers` option), so a bad
value is refused the same way by both, when the host is built, before any fire.
"""

from __future__ import annotations

#: The most threads the resident host (`run`) starts by default, one per task.
RESIDENT_MAX_WORKERS = 64
#: The most threads the cron-driven host (`tick`) starts by default, one per task.
TICK_MAX_WORKERS = 32


def checked_max_workers(max_workers: int | None) -> int | None:
    """`max_workers` if it is None or a whole number of at least 1; a `ValueError` else."""
    if max_workers is None:
        return None
    if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
        raise ValueError(f"max_workers must be a whole number of at least 1, got {max_workers!r}")
    return max_workers


def worker_count(max_workers: int | None, tasks: int, ceiling: int) -> int:
    """`max_workers` when set, else one thread per task, at least 1 and at most `ceiling`."""
    return max_workers if max_workers is not None else min(max(tasks, 1), ceiling)
