"""Catch-up at the fire path: what a fire missed while the fleet was down is allowed.

A host finds the missed fires of a task with `catchup=` (`fires.catch_up_plan`) and
hands each to the runner as a `Fire` whose trigger is `TriggerKind.CATCH_UP`. Such a
fire is late beyond grace by design, so the stages measure it against its task's
window instead:

* deciding lets it through while it is at most `catchup + grace` late
  (`Fire.catchup_window`: a fire was planned while it was in the window, and the
  grace on top is any fire's, so the oldest fire of a window is not lost to the
  milliseconds between the plan and its run), and the policy
  (`FirePolicy.before_claim`) skips a catch-up fire of a task without `catchup=`
  (`without_window`: a caller's mistake, recorded, never run);
* its claim lives until `instant + catchup + grace + clock_skew`: any node that
  could still catch the fire up finds it claimed, as for any fire within grace;
* its run, when its body returns, is recorded `caught_up` with a reason saying how
  late it ran (`caught_up_state`), so `runs`, `monitor` and the Django admin show
  it; a body that raises or times out is recorded as any other.

Everything else (the claim, the task lock, adoption, the start refused for a fire
already finished) is the path every fire takes: a missed fire runs at most once
for the same reasons any fire does.
"""

from __future__ import annotations

from firefly_scheduling.fires.outcome import Fire, TriggerKind
from firefly_scheduling.history.port import RunState
from firefly_scheduling.schedule.durations import readable_duration

#: Why a catch-up fire of a task without `catchup=` is skipped.
NO_CATCHUP_WINDOW = "a catch-up fire of a task without catchup=: nothing allows it to run late"


def without_window(fire: Fire) -> bool:
    """Whether `fire` is a catch-up fire of a task without `catchup=`: the policy
    (`FirePolicy.before_claim`) skips it with `NO_CATCHUP_WINDOW`."""
    return fire.trigger is TriggerKind.CATCH_UP and fire.task.catchup is None


def caught_up_state(
    fire: Fire, state: RunState, error: str | None, late: float
) -> tuple[RunState, str | None]:
    """The state and reason a run's end is written with: `caught_up` for a catch-up
    fire whose body returned, else as given."""
    if fire.trigger is not TriggerKind.CATCH_UP or state is not RunState.SUCCEEDED:
        return state, error
    window = fire.task.catchup
    within = "" if window is None else f", within catchup={readable_duration(window)}"
    return (
        RunState.CAUGHT_UP,
        f"caught up: missed while the fleet was down; ran {late:.3f}s late{within}",
    )
