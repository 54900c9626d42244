"""`TaskRuntime`: what every fire of a host needs, built once, some of it lazily.

The lock, the initial-delay gate and the task callables are resolved on first use
when a host asks for laziness (the library host: nothing is touched until the
application's scheduler fires), and up front otherwise (`run` and `tick` fail at
boot, not on the fifth fire). The runtime also counts the fires in flight, which is
what a graceful shutdown waits for.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from datetime import datetime
from typing import Generic, Self, TypeVar

from firefly_scheduling.fires.runner import FireRunner, utc_now
from firefly_scheduling.hosts.observation.observers import FireObserver
from firefly_scheduling.hosts.observation.passed_over_report import PassedOverReport
from firefly_scheduling.hosts.observation.telemetry import Telemetry, process_telemetry
from firefly_scheduling.hosts.runtime.coroutine_loop import CoroutineLoop
from firefly_scheduling.initial_delay.gate import InitialDelayGate
from firefly_scheduling.locks.port import DistributedLock
from firefly_scheduling.tasks.callables import CallableResolver, Resolver

_T = TypeVar("_T")
_Lock = TypeVar("_Lock")
_Runner = TypeVar("_Runner")


class Lazy(Generic[_T]):
    """A value built by `factory` on first `get()`, once, even from several threads.

    A factory that raises is tried again on the next `get()`: a lock server that was
    down when the first fire came may be up for the second.
    """

    def __init__(self, factory: Callable[[], _T]) -> None:
        self._factory = factory
        self._mutex = threading.Lock()
        self._value: _T | None = None
        self._built = False

    @classmethod
    def of(cls, value: _T) -> Lazy[_T]:
        """An already-built value."""
        lazy = cls(lambda: value)
        lazy.get()
        return lazy

    def get(self) -> _T:
        if not self._built:
            with self._mutex:
                if not self._built:
                    self._value = self._factory()
                    self._built = True
        return self._value  # type: ignore[return-value]  # set together with _built

    @property
    def built(self) -> bool:
        return self._built


class RuntimeBase(Generic[_Lock, _Runner]):
    """What every host's runtime shares, whatever its flavour: the lock and the fire
    runner (of the flavour's types), the gate, the callables, the observers, the wall
    clock fires are judged by, and the fires in flight.

    `fire_runner(runtime)` builds the runner on first use (default: `default_runner`).
    `loop` is the threaded hosts' own event loop for `async def` tasks
    (`hosts.runtime.coroutine_loop`), started by the first one; an asyncio host awaits its
    tasks on its own loop and never starts it.
    """

    def __init__(
        self,
        *,
        lock: Lazy[_Lock],
        gate: Lazy[InitialDelayGate],
        resolver: Resolver | None = None,
        node: str,
        observers: Sequence[FireObserver] = (),
        fire_runner: Callable[[Self], _Runner] | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        #: The wall clock fires are judged by (grace); a host with a clock seam replaces it.
        self.now: Callable[[], datetime] = utc_now
        self.gate = gate
        self.callables = CallableResolver(resolver)
        self.node = node
        self.observers = tuple(observers)
        #: A span and metrics per fire (OpenTelemetry when its API is installed).
        self.telemetry = process_telemetry() if telemetry is None else telemetry
        #: The throttled warning for fires the jobs passed over
        #: (`hosts.observation.passed_over_report`).
        self.passed_over = PassedOverReport()
        self._accepting = True
        self._in_flight: dict[int, object] = {}
        self._next_ticket = 0
        self._idle = threading.Condition()
        self.lock = lock
        make_runner = fire_runner or type(self).default_runner
        #: Claims, keep-alive, fencing and history for every fire (built with the lock).
        self.fire_runner: Lazy[_Runner] = Lazy(lambda: make_runner(self))
        self.loop = CoroutineLoop()

    def default_runner(self) -> _Runner:
        """The fire runner of this flavour on `lock`, judged by `wall_now`, named `node`."""
        raise NotImplementedError

    def wall_now(self) -> datetime:
        """`now()` looked up on every call, so a clock installed later is honoured."""
        return self.now()

    @property
    def accepting(self) -> bool:
        """False once shutdown began: no new fire starts."""
        return self._accepting

    def stop_accepting(self) -> None:
        with self._idle:
            self._accepting = False

    def admit(self, fire: object) -> int | None:
        """Count `fire` as in flight from now, before it reaches `tracking`; None after
        shutdown began. A host that claims a fire before handing it to a worker admits
        it first, so a shutdown in between still waits for the fire it won."""
        with self._idle:
            if not self._accepting:
                return None
            ticket = self._next_ticket
            self._next_ticket += 1
            self._in_flight[ticket] = fire
            return ticket

    @contextmanager
    def tracking(self, fire: object, *, admitted: int | None = None) -> Iterator[bool]:
        """Count `fire` as in flight; yield False (and count nothing) after shutdown began.

        `admitted` is the ticket of an earlier `admit`: the fire is accepted already.
        """
        ticket = admitted if admitted is not None else self.admit(fire)
        try:
            yield ticket is not None
        finally:
            if ticket is not None:
                self.finish(ticket)

    def finish(self, ticket: int) -> None:
        """The fire admitted under `ticket` is over."""
        with self._idle:
            del self._in_flight[ticket]
            self._idle.notify_all()

    def in_flight(self) -> list[object]:
        """The fires running now."""
        with self._idle:
            return list(self._in_flight.values())

    def wait_idle(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for every fire in flight to end; True if they did."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._in_flight, timeout=max(timeout, 0.0))


class TaskRuntime(RuntimeBase[DistributedLock, FireRunner]):
    """The lock, gate, callables, observers and in-flight bookkeeping of one threaded host."""

    def default_runner(self) -> FireRunner:
        return FireRunner(self.lock.get(), clock=self.wall_now, node=self.node)

    def close(self) -> None:
        """Close the fire runner, the lock, the gate's store and the task loop if built."""
        # Each is closed even if an earlier one fails; the runner goes first because it
        # releases the claims it still holds through the lock.
        with ExitStack() as closing:
            closing.callback(self.loop.close)
            if self.gate.built:
                closing.callback(self.gate.get().close)
            if self.lock.built:
                close = getattr(self.lock.get(), "close", None)
                if callable(close):
                    closing.callback(close)
            if self.fire_runner.built:
                closing.callback(self.fire_runner.get().close)
