"""What one `tick` pass did: its fires' results, the slots it did not run, and why.

The pass's exit status, `--json` rows and one-line summary are read from here, so
`tick`'s command line and the tests judge a pass by the same rules: a failure its
retry followed is judged by the retry, and a fire claimed elsewhere, not due or held
back is no problem. A slot not run says why in its row (`MISSED_SLOT_REASON`...).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from firefly_scheduling.fires.outcome import Fire, FireResult, Verdict

#: Verdicts that make `tick` exit 1: a body failed or ran past its timeout, or the
#: backend failed (the lock, its lease, the anchor store). A run found expired is the
#: history's news of an earlier pass, reported by `monitor`, not a failure of this one.
PROBLEM_VERDICTS = frozenset(
    {
        Verdict.FAILED,
        Verdict.TIMED_OUT,
        Verdict.BACKEND_ERROR,
        Verdict.LOCK_LOST,
        Verdict.UNAVAILABLE,
    }
)
#: The reason recorded for a slot skipped because the task's previous run still went.
OVERLAPPING_SLOT_REASON = "passed over on this node: its previous run still went"
#: Why a slot of the minute was not run, as its `--json` row says.
MISSED_SLOT_REASON = "its slot had passed when this pass started"
NOT_STARTED_REASON = "a stop request came before its slot"
ABANDONED_REASON = (
    "still running when the grace period ended: the process exited without waiting "
    "(its task lock ends with the process or its TTL)"
)


@dataclass(frozen=True)
class TickSlot:
    """A fire planned for this minute; it may start from `fire.due` until `due + width`."""

    fire: Fire
    width: timedelta

    @property
    def ends_at(self) -> datetime:
        return self.fire.due + self.width


@dataclass
class TickReport:
    """What one tick pass did."""

    minute: datetime
    results: list[FireResult] = field(default_factory=list)
    missed: list[TickSlot] = field(default_factory=list)
    overlapping: list[TickSlot] = field(default_factory=list)
    #: Set when a stop request ended the pass early.
    stopped: bool = False
    #: Slots a stop request kept from starting.
    not_started: list[TickSlot] = field(default_factory=list)
    #: Fires still running when the grace period ended (their task locks still held).
    abandoned: list[object] = field(default_factory=list)
    #: Fires that raised outside their task body (a defect or a backend failure),
    #: each with the exception's text.
    crashed_fires: list[tuple[Fire, str]] = field(default_factory=list)

    @property
    def crashed(self) -> int:
        """How many fires raised outside their task body."""
        return len(self.crashed_fires)

    def every_result(self) -> list[FireResult]:
        """Each fire's result, preceded by the died runs it adopted or expired."""
        return [each for result in self.results for each in (*result.adopted, result)]

    def problems(self) -> list[FireResult]:
        """Results an operator must hear about: a body failed or timed out, or the backend failed.

        A fire claimed elsewhere, not due, too late, held back or overlapping was
        legitimately not run here, and is no problem; a failure its retry followed in
        the pass is judged by the retry.
        """
        return [
            result
            for result in self.every_result()
            if (result.verdict in PROBLEM_VERDICTS and result.retry is None) or result.lost
        ]

    @property
    def exit_status(self) -> int:
        """1 when a fire met a backend error, a lost lock, a failing or timed-out body; else 0.

        A stop request changes nothing here: a body that failed before it still fails
        the pass, whether or not another was abandoned.
        """
        return 1 if self.problems() or self.crashed else 0

    def rows(self) -> list[dict[str, object]]:
        """One JSON-ready object per fire touched: each fire handled (adoptions included),
        each that raised outside its body, each abandoned, then each slot not run; every
        row that did not succeed says why in `error`."""
        rows: list[dict[str, object]] = [
            {
                "target": result.fire.target,
                "instant": result.fire.instant.isoformat(),
                "trigger": result.fire.trigger.value,
                "verdict": result.verdict.name.lower(),
                "adoption": result.adoption,
                "attempt": result.attempt,
                "token": result.token,
                "node": result.node,
                "started_at": None if result.started_at is None else result.started_at.isoformat(),
                "ended_at": None if result.ended_at is None else result.ended_at.isoformat(),
                "error": result.error,
            }
            for result in self.every_result()
        ]
        unrun: list[tuple[str, Fire, str]] = [
            ("crashed", fire, error) for fire, error in self.crashed_fires
        ]
        unrun.extend(
            ("abandoned", fire, ABANDONED_REASON)
            for fire in self.abandoned
            if isinstance(fire, Fire)
        )
        for verdict, slots, reason in (
            ("missed", self.missed, MISSED_SLOT_REASON),
            ("overlapping", self.overlapping, OVERLAPPING_SLOT_REASON),
            ("not_started", self.not_started, NOT_STARTED_REASON),
        ):
            unrun.extend((verdict, slot.fire, reason) for slot in slots)
        rows.extend(
            {
                "target": fire.target,
                "instant": fire.instant.isoformat(),
                "trigger": fire.trigger.value,
                "verdict": verdict,
                "adoption": False,
                "attempt": None,
                "token": None,
                "node": None,
                "started_at": None,
                "ended_at": None,
                "error": error,
            }
            for verdict, fire, error in unrun
        )
        return rows

    def summary(self) -> str:
        """One line: the count of each verdict ("3 succeeded; 2 claimed elsewhere")."""
        verdicts = Counter(result.verdict.value for result in self.results)
        parts = [f"{count} {verdict}" for verdict, count in sorted(verdicts.items())]
        if self.missed:
            parts.append(f"{len(self.missed)} slot(s) already past at start")
        if self.overlapping:
            parts.append(f"{len(self.overlapping)} slot(s) skipped: previous run still going")
        if self.crashed:
            parts.append(f"{self.crashed} fire(s) failed outside their body (see the log)")
        if self.stopped:
            parts.append(
                f"stopped early: {len(self.not_started)} slot(s) not started, "
                f"{len(self.abandoned)} run(s) abandoned"
            )
        detail = "; ".join(parts) if parts else "nothing due"
        return f"tick {self.minute.strftime('%Y-%m-%d %H:%M')} UTC: {detail}"
