"""`InitialDelayGate`: hold a task back until its `initial_delay` has passed.

The window is measured from the **first observation** of the task by any process,
not from this process's start. Under the cron-driven host a fresh process starts
every minute, so a window measured from process start would never elapse and the
task would silently never run. The first observer writes an anchor add-if-absent
under `firefly:scheduling:initial-delay:<target>`; every later process, on any
node, measures from it.

Without a named release the anchor is permanent: the delay is a warm-up for a newly
introduced task, and a redeploy finds the window long elapsed. With
`firefly.scheduling.initial-delay.release` set, the anchor records the release, and
the first process of a different release re-arms the window (compare-and-set, so
exactly one process does it and logs it). The release must change once per
deployment and never within one: a per-process value (a PID, a boot time) re-arms
on every start and the task never runs.

Failures admit rather than hang: an unreachable store logs a warning and admits; a
store that cannot read back its own write logs once and admits. Once a task has
been admitted, this process never asks again: the gate holds back the first run
only, then leaves the cadence alone.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.initial_delay.anchor import Anchor, anchor_key
from firefly_scheduling.initial_delay.port import AnchorStore, AnchorStoreError
from firefly_scheduling.initial_delay.selection import shared_anchor_stores
from firefly_scheduling.settings import Settings, env_var
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

logger = logging.getLogger("firefly_scheduling.initial_delay")

_ENABLED_KEY = "firefly.scheduling.initial-delay.enabled"
# Compare-and-set rounds before giving up on re-arming (another process keeps
# rewriting the anchor: two releases running at once). Bounded; then we admit.
_REARM_ATTEMPTS = 3


class InitialDelayGate:
    """Decide, per fire, whether a delayed task may run yet.

    Thread-safe: the resident host fires from a pool of threads. Tasks without an
    `initial_delay` are admitted without any I/O.
    """

    def __init__(self, store: AnchorStore, *, release: str = "") -> None:
        self._store = store
        self._release = release
        self._open: set[str] = set()
        self._told_held: set[str] = set()
        self._warned_unreadable = False
        self._mutex = threading.Lock()
        self._target_mutexes: dict[str, threading.Lock] = {}

    @property
    def store(self) -> AnchorStore:
        return self._store

    def admit(self, descriptor: ScheduledDescriptor) -> bool:
        """True when `descriptor` may run now; False while its window is still open."""
        delay = descriptor.initial_delay
        target = descriptor.target
        if not delay or target in self._open:
            return True
        with self._mutex_for(target):
            if target in self._open:
                return True
            try:
                admitted = self._window_elapsed(target, delay)
            except AnchorStoreError as err:
                logger.warning(
                    "initial delay of %s: the anchor store is unreachable (%s); running "
                    "without the delay",
                    target,
                    err,
                )
                admitted = True
            if admitted:
                self._open.add(target)
            return admitted

    def close(self) -> None:
        self._store.close()

    # -- internals ----------------------------------------------------------------

    def _window_elapsed(self, target: str, delay: float) -> bool:
        store, key = self._store, anchor_key(target)
        now = store.now()
        ours = Anchor(now, self._release).encode()
        raw = store.get(key)
        if raw is None:
            store.add(key, ours)
            raw = store.get(key)
            if raw is None:
                self._warn_unreadable()
                return True
        anchor = self._current_anchor(target, key, raw, ours)
        if anchor is None:
            logger.warning(
                "initial delay of %s: the anchor keeps changing under us (two releases at "
                "once?); running without the delay",
                target,
            )
            return True
        remaining = anchor.observed_at + delay - now
        if remaining > 0:
            if target not in self._told_held:  # once per process: not once per fire
                self._told_held.add(target)
                logger.info(
                    "initial delay of %s: held back until %s (first seen %s, delay %gs); it "
                    "first runs at its first fire from then on",
                    target,
                    _utc_text(anchor.observed_at + delay),
                    _utc_text(anchor.observed_at),
                    delay,
                )
            else:
                logger.debug("initial delay of %s: held back, %.3f s left", target, remaining)
            return False
        logger.info(
            "initial delay of %s has elapsed (since %s); the task runs from now on",
            target,
            _utc_text(anchor.observed_at + delay),
        )
        return True

    def _current_anchor(self, target: str, key: str, raw: str, ours: str) -> Anchor | None:
        """The anchor this release measures from, re-arming it once if it belongs to another."""
        for _ in range(_REARM_ATTEMPTS):
            anchor = Anchor.decode(raw)
            if anchor is not None and (not self._release or anchor.release == self._release):
                return anchor
            if self._store.replace(key, raw, ours):
                logger.info(
                    "initial delay of %s: release %r re-armed the window (the anchor belonged "
                    "to %s)",
                    target,
                    self._release,
                    repr(anchor.release) if anchor is not None else "an unreadable value",
                )
                return Anchor.decode(ours)
            reread = self._store.get(key)
            if reread is None:
                self._store.add(key, ours)
                reread = self._store.get(key)
                if reread is None:
                    self._warn_unreadable()
                    return Anchor.decode(ours)
            raw = reread
        return None

    def _warn_unreadable(self) -> None:
        with self._mutex:
            if self._warned_unreadable:
                return
            self._warned_unreadable = True
        logger.warning(
            "the initial-delay anchor store %r cannot read back its own write; delayed tasks "
            "run without their delay",
            self._store,
        )

    def _mutex_for(self, target: str) -> threading.Lock:
        with self._mutex:
            return self._target_mutexes.setdefault(target, threading.Lock())


def _utc_text(epoch_seconds: float) -> str:
    return f"{datetime.fromtimestamp(epoch_seconds, UTC):%Y-%m-%d %H:%M:%S} UTC"


def first_run_from(store: AnchorStore, descriptor: ScheduledDescriptor) -> datetime | None:
    """The earliest instant `descriptor` may first run, from its anchor; None when unanchored.

    Reads only (the listing must not start a window): None for a task without a
    delay, or whose first observation is not recorded yet. A release set to re-arm
    the window is not taken into account (the next host of that release does it).
    """
    if descriptor.initial_delay is None:
        return None
    raw = store.get(anchor_key(descriptor.target))
    anchor = None if raw is None else Anchor.decode(raw)
    if anchor is None:
        return None
    return datetime.fromtimestamp(anchor.observed_at + descriptor.initial_delay, UTC)


def delayed_tasks(descriptors: Iterable[ScheduledDescriptor]) -> list[ScheduledDescriptor]:
    """The descriptors that carry an `initial_delay`."""
    return [d for d in descriptors if d.initial_delay is not None]


def check_initial_delays(descriptors: Sequence[ScheduledDescriptor], settings: Settings) -> None:
    """Boot check: refuse a delay that is not a positive length, or a gate switched off.

    `initial-delay.enabled=false` in an application whose tasks carry a delay is a
    refusal, not a parameter silently ignored.
    """
    delayed = delayed_tasks(descriptors)
    for descriptor in delayed:
        delay = descriptor.initial_delay
        if delay is None or not math.isfinite(delay) or delay <= 0:
            raise ConfigurationError(
                f"task {descriptor.target}: initial_delay must be a positive, finite "
                f"duration, got {delay!r}"
            )
    if delayed and not settings.initial_delay_enabled:
        targets = ", ".join(d.target for d in delayed)
        raise ConfigurationError(
            f"{env_var(_ENABLED_KEY)}=false ({_ENABLED_KEY}) but these tasks carry an "
            f"initial_delay: {targets}. Remove the delays or enable the gate; it is never "
            "silently ignored"
        )


def warn_if_per_process(
    store: AnchorStore, descriptors: Sequence[ScheduledDescriptor], *, host: str
) -> bool:
    """Warn (and return True) when a per-process store backs delayed tasks under `host`.

    Under the cron-driven host every process re-anchors at its own start, so a
    delayed task would never run. The warning names the tasks and the fix.
    """
    delayed = delayed_tasks(descriptors)
    if store.shared_across_processes or not delayed:
        return False
    logger.warning(
        "the %s host starts a fresh process each time, but the initial-delay anchor store "
        "(%r) lives in one process's memory: these delayed tasks will never see their window "
        "elapse and will never run: %s. Set FIREFLY_SCHEDULING_INITIAL_DELAY_STORE to a shared "
        "store: %s",
        host,
        store,
        ", ".join(d.target for d in delayed),
        shared_anchor_stores(),
    )
    return True
