"""A task of a test's own: a fresh target, locked under its own name, checked as at boot.

The locks and histories are shared servers: a target made unique per test keeps
reruns and parallel workers from meeting each other's claims, locks and records.
"""

from __future__ import annotations

import uuid
from typing import Any

from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.validation import validate_descriptor


def unique_task(prefix: str, **arguments: Any) -> ScheduledDescriptor:
    """`tests.<prefix>_<random hex>:job`, locked under its target, with `arguments`
    (the `ScheduledDescriptor` fields: a schedule, `lock_ttl`, the policies)."""
    target = f"tests.{prefix}_{uuid.uuid4().hex}:job"
    return validate_descriptor(ScheduledDescriptor(target=target, lock_name=target, **arguments))
