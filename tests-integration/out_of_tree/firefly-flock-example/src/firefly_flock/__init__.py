"""Example out-of-tree provider `flock`: leases and anchors in files of one directory."""

from __future__ import annotations

from firefly_flock.anchors import FlockAnchorStore
from firefly_flock.lock import FlockLock

__all__ = ["FlockAnchorStore", "FlockLock"]
