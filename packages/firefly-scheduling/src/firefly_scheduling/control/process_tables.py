"""The tables of the `memory://` control stores: one per name, for the whole process.

Kept apart from the stores so the asyncio store and its generated synchronous twin
share them: a sync node and an async node of one process read each other's writes.
"""

from __future__ import annotations

import threading

#: `memory://<name>` -> {(kind, key): value}.
TABLES: dict[str, dict[tuple[str, str], str]] = {}
#: A threading lock: the synchronous store is shared by threads, and the asyncio store
#: never awaits while holding it.
MUTEX = threading.Lock()
