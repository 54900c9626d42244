"""The `effects` setups' two rules, over the tables a second client read after the run.

5. **Effect once.** For every fire of the effects tasks, the effects table holds
   exactly one row when the history records the fire `succeeded`, and none
   otherwise (no record, or `running`, `failed`, `expired`, `skipped`): the row and
   the success commit together or not at all (`current_fire().atomic`). A row with
   no successful record, a success with no row, and a fire with two rows are each a
   violation.
6. **Guarded writes in token order.** Each committed attempt of the guarded-writes
   table carries the token it was tried with and the token its row held when it was
   tried (read under the row's lock, in the same transaction). An attempt that
   wrote must carry a token not older than the one it found (an older token over a
   newer one is the stale write the guard exists to refuse); an attempt refused must
   have found a newer token than its own (a refusal of a current token loses a
   write). And each guarded row must hold the newest token that ever wrote it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from chaos_harness.body_runs import CheckReport, Violation
from chaos_harness.history import HistoryKey, HistoryRow


@dataclass(frozen=True)
class GuardedWrite:
    """One committed attempt of `fenced_update`, as the guarded-writes table holds it."""

    name: str
    key: HistoryKey
    attempt: int
    token: int
    previous: int | None
    written: bool

    def describe(self) -> str:
        return (
            f"{self.key.target} @ {self.key.instant.isoformat()} attempt {self.attempt} "
            f"(token {self.token}, found {self.previous})"
        )


@dataclass
class EffectsState:
    """What the tables held after the run: the effect rows' fires (one entry per row),
    each committed guarded write attempt, and each guarded row's stored token."""

    effects: list[HistoryKey] = field(default_factory=list)
    writes: list[GuardedWrite] = field(default_factory=list)
    guarded: dict[str, int | None] = field(default_factory=dict)


def check_effect_once(
    state: EffectsState,
    history: dict[HistoryKey, HistoryRow],
    targets: set[str],
    report: CheckReport,
) -> None:
    """Rule 5: one effect row per succeeded fire of `targets`, none for any other."""
    rows = Counter(state.effects)
    fires = {key for key in history if key.target in targets} | set(rows)
    for key in sorted(fires, key=lambda k: (k.target, k.instant)):
        record = history.get(key)
        succeeded = record is not None and record.state == "succeeded"
        expected = 1 if succeeded else 0
        if rows[key] == expected:
            continue
        recorded = "no record" if record is None else f"a {record.state!r} record"
        report.violations.append(
            Violation(
                "effect once",
                f"fire {key.target} @ {key.instant.isoformat()}: {rows[key]} effect row(s) "
                f"and {recorded} in the history (expected {expected})",
                0,
            )
        )


def check_guarded_writes(state: EffectsState, report: CheckReport) -> None:
    """Rule 6: no guarded row written by a token older than the newest that wrote it."""
    newest: dict[str, int] = {}
    by_name: dict[str, list[GuardedWrite]] = defaultdict(list)
    for write in state.writes:
        by_name[write.name].append(write)
    for name, writes in sorted(by_name.items()):
        for write in writes:
            if write.written:
                newest[name] = max(newest.get(name, write.token), write.token)
                if write.previous is not None and write.token < write.previous:
                    report.violations.append(
                        Violation(
                            "guarded writes",
                            f"row {name!r}: {write.describe()} wrote over a newer token",
                            0,
                        )
                    )
            elif write.previous is None or write.token >= write.previous:
                report.violations.append(
                    Violation(
                        "guarded writes",
                        f"row {name!r}: {write.describe()} was refused, and no newer "
                        "token had written it",
                        0,
                    )
                )
    for name, stored in sorted(state.guarded.items()):
        if stored != newest.get(name):
            report.violations.append(
                Violation(
                    "guarded writes",
                    f"row {name!r} holds token {stored}, and the newest token that wrote "
                    f"it is {newest.get(name)}",
                    0,
                )
            )
