"""Lock providers: the descriptor an adapter registers, and the one loader that reads them.

`LockProvider` is all an adapter imports from here; the loader lives in
`providers.registry` and the lock builders in `providers.building`. See
`docs/writing-a-backend.md` for how an adapter fills in its descriptor.
"""

from __future__ import annotations

from firefly_scheduling.providers.descriptor import Factory, LockProvider, StoreSlot

__all__ = ["Factory", "LockProvider", "StoreSlot"]
