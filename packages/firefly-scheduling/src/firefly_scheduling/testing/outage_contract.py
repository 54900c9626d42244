"""The outage contract: what a lease lock does while its server is down, and after.

A server stops (a crash, a deploy, a failover) and comes back. Meanwhile every call
that needs it fails fast with `LockBackendError`, and a release never raises: the
holding is kept, for a later release. After the restart the lock is what the server
kept: a server that forgets its keys (Redis without persistence, memcached) frees
the name, and the old holder learns it is lost at its next renewal; a server that
keeps them on disk (etcd) keeps the holder's lock, which it can renew and release.
A connection the restart closed is replaced before use, not failed on.

A backend plugs in with `lock_factory` (as for `LockContract`), pointing at a server
of the test's own, `restartable_server` (never a shared one), and
`restart_keeps_locks`. Synchronous only: the asyncio flavours share the same
connection and error code.
"""

from __future__ import annotations

import re
import time
from typing import Any, ClassVar, Protocol

import pytest

from firefly_scheduling.errors import LockBackendError
from firefly_scheduling.testing.nodes import NodeFixtures, Nodes

#: Longest a call may take to fail while the server is down.
OUTAGE_FAILURE_SECONDS = 10.0


class RestartableServer(Protocol):
    """A server of the test's own (`local_server.LocalServer`, say)."""

    def stop(self) -> None:
        """Stop the server; calls fail until `start`."""

    def start(self) -> None:
        """Start it again; returns once it serves requests."""


class OutageContract(NodeFixtures):
    """Cases every lease lock must pass across an outage of its server."""

    #: Whether the server keeps its keys across a restart (on disk) or forgets them.
    restart_keeps_locks: ClassVar[bool]

    @pytest.fixture
    def restartable_server(self) -> RestartableServer:
        """The server `lock_factory`'s locks use; a backend overrides it."""
        pytest.skip("the backend supplies no restartable_server")

    def test_an_outage_fails_calls_fast_and_the_restart_keeps_or_forgets_the_lock(
        self, nodes: Nodes, name: str, restartable_server: RestartableServer
    ) -> None:
        holder: Any = nodes()  # a lease lock: `renew`, `is_lost`, `is_held` besides the port
        other = nodes()
        assert holder.try_acquire(name, 60)
        restartable_server.stop()

        started = time.monotonic()
        backend = re.escape(f"{holder.backend_name} lock backend")
        with pytest.raises(LockBackendError, match=backend):
            other.try_acquire(name, 60)
        assert time.monotonic() - started < OUTAGE_FAILURE_SECONDS
        holder.release(name)  # logs, never raises; the holding is kept for a later release
        assert holder.is_held(name)

        restartable_server.start()
        if self.restart_keeps_locks:
            assert other.try_acquire(name, 60) is False, "the restart freed a held lock"
            assert holder.renew(name, 60) is True
            holder.release(name)
            assert other.try_acquire(name, 60)
        else:
            assert other.try_acquire(name, 60), "the restart kept a lock it cannot have kept"
            assert holder.renew(name, 60) is False
            assert holder.is_lost(name)
        other.release(name)

    def test_a_connection_the_restart_closed_is_replaced_before_use(
        self, nodes: Nodes, name: str, restartable_server: RestartableServer
    ) -> None:
        lock = nodes()
        assert lock.try_acquire(name, 60)  # a connection is open, idle, kept for reuse
        restartable_server.stop()
        restartable_server.start()
        # No call failed in between, so only the closed socket tells of the restart.
        assert lock.try_acquire(name + ":after", 60)
        lock.release(name + ":after")
