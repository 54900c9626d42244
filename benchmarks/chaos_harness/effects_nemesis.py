"""Faults aimed at an open `atomic` block, for the `effects` setups.

The effects bodies stamp each phase of their block on the evidence log
(`effects_tasks`); `BlockWatcher` tails the log and knows which node process has a
block open, and in which phase. The aimed kinds, each on a node in one of its
phases (the one hit is in the fault's detail):

* `block_pause`: SIGSTOP past the lease, about to make its guarded write (a newer
  holder may write first, and the woken write must be refused) or with its effect
  row sent and uncommitted (another node may adopt the fire before it wakes and
  tries to commit);
* `block_kill`: SIGKILL with the row sent and uncommitted, or once the block has
  written the fire's success, just before the commit;
* `commit_session`: end its server sessions (`pg_terminate_backend`, `KILL`) just
  before the commit, so the commit finds its session gone.

A kind waits a little for a calm node in the phase it needs (longer, the harness
loop held meanwhile, until it has been injected once). Finding none, it is put off:
behind the rest of the first round until it has been injected once, and dropped
after that (the slot passes without a fault).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

from chaos_harness.servers import end_sessions

if TYPE_CHECKING:
    from chaos_harness.cluster import ChaosNode
    from chaos_harness.nemesis import Nemesis
    from chaos_harness.setups import Backend

#: The phases each aimed kind may find its victim in.
PHASES_OF = {
    "block_pause": ("guarding", "inside"),
    "block_kill": ("inside", "committing"),
    "commit_session": ("committing",),
}
EFFECTS_KINDS = tuple(PHASES_OF)
#: The tasks' lease (`effects_tasks.LOCK_TTL`): a pause must outlive it.
LEASE_SECONDS = 1.0
#: How long (seconds) a kind waits for a victim in its phase before it is put off;
#: until it has been injected once, long enough for a fire of a stretched pace.
AIM_SECONDS = 0.5
FIRST_AIM_SECONDS = 6.0
_POLL_SECONDS = 0.01


def effects_kinds(backend: Backend) -> tuple[str, ...]:
    """The aimed kinds that apply: ending a session needs a server with sessions."""
    if not backend.effects:
        return ()
    return tuple(k for k in EFFECTS_KINDS if k != "commit_session" or backend.sessions)


class BlockWatcher:
    """Which node processes have an `atomic` block open, read from the evidence log."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._offset = 0
        self._partial = b""
        #: pid -> the open blocks' phases, by (target, instant, attempt).
        self._open: dict[int, dict[tuple[str, str, int], str]] = {}

    def refresh(self) -> None:
        try:
            with self._path.open("rb") as log:
                log.seek(self._offset)
                chunk = log.read()
        except OSError:
            return
        self._offset += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        for line in lines:
            if b'"ev": "block"' not in line:
                continue
            event = json.loads(line)
            blocks = self._open.setdefault(int(event["pid"]), {})
            fire = (str(event["target"]), str(event["instant"]), int(event["attempt"] or 0))
            if event["phase"] in {"committed", "failed"}:
                blocks.pop(fire, None)
            else:
                blocks[fire] = str(event["phase"])

    def phase(self, pid: int, phases: tuple[str, ...]) -> str | None:
        """One of `phases` that a block of process `pid` is in, if any."""
        return next((p for p in self._open.get(pid, {}).values() if p in phases), None)


def inject_aimed(nemesis: Nemesis, kind: str) -> None:
    """Inject `kind` on a calm node whose block is in its phase, or put it off."""
    patience = AIM_SECONDS if nemesis.injected[kind] else FIRST_AIM_SECONDS
    aimed = _victim(nemesis, PHASES_OF[kind], patience)
    if aimed is None:
        if nemesis.injected[kind] == 0:  # every kind at least once: after the others
            nemesis._first_round.insert(0, kind)
        return
    victim, phase = aimed
    duration, detail = 0.0, phase
    if kind == "block_pause":
        duration = LEASE_SECONDS + nemesis.rng.uniform(0.2, 2.5)
        victim.pause()
        nemesis.later(duration, victim.resume)
    elif kind == "commit_session":
        dialect = nemesis.backend.sessions
        assert dialect is not None
        assert victim.proxy is not None
        ended = end_sessions(dialect, nemesis.backend.url, victim.proxy.upstream_ports())
        detail = f"{phase}: {ended} session(s)"
    else:
        duration = nemesis.rng.uniform(0.3, 2.0)
        victim.kill()
        nemesis.later(duration, victim.spawn)
    victim.disturbed_until = max(victim.disturbed_until, time.monotonic() + duration + 0.5)
    nemesis._record(kind, victim.name, duration, detail)


def _victim(
    nemesis: Nemesis, phases: tuple[str, ...], patience: float
) -> tuple[ChaosNode, str] | None:
    """A calm resident node with a block in one of `phases`, and that phase; waited
    for up to `patience` seconds."""
    deadline = time.monotonic() + patience
    while True:
        nemesis.blocks.refresh()
        calm = nemesis._calm()  # the rule every disturbing kind obeys
        aimed = [
            (node, phase)
            for node in calm
            if (phase := nemesis.blocks.phase(node.pid, phases)) is not None
        ]
        if aimed:
            return nemesis.rng.choice(aimed)
        if time.monotonic() >= deadline:
            return None
        time.sleep(_POLL_SECONDS)
