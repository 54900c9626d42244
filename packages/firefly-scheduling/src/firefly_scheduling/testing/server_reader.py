"""A second client of a lock's server: what the hostile-name cases check the lock against.

The lock under test reports what it believes; a `ServerReader` reads what the server
holds, with a client of its own (never the lock's code) and the key the backend
documents for a name. A backend's contract supplies one through the `server_reader`
fixture; without one the hostile-name cases still prove exclusion, but not the keys.

The reader also plants a canary (a table, a key) before the cases run, and
`fingerprint` reads it back with whatever else a name could reach outside the
lock's own keys (the database's tables, the keys outside the lock's namespace): a
name that ran as a statement changes it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Sequence


class ServerReader(ABC):
    """Reads a lock's server directly. Synchronous: the cases call it between steps."""

    #: The table or key a breakout name tries to destroy (`hostile_names(canary=...)`).
    canary: str = "canary"

    @abstractmethod
    def key(self, name: str) -> Hashable:
        """The server key the backend documents for lock `name`, as `held` reports it."""

    @abstractmethod
    def held(self, candidates: Sequence[Hashable]) -> frozenset[Hashable]:
        """The lock keys the server holds now.

        Every one in the lock's namespace where this reader can list it (a private
        table, a private database), else those of `candidates` the server holds (a
        server other tests share, or one that cannot list its locks).
        """

    @abstractmethod
    def fingerprint(self) -> Hashable:
        """Everything outside the lock's keys that a name could reach, the canary first.

        Equal before and after a name's case unless the name ran as a statement.
        """

    def close(self) -> None:  # noqa: B027 - most readers hold nothing to close
        """Drop the canary and close the client."""
