"""The fire policies in the task mix (`chaos_harness.policy_tasks`), one task each.

Every body stamps its start and end on the evidence log as the mix's bodies do
(`tasks._body`). The tasks, and the rule of `policy_rules` each one feeds:

* `buffered` (`overlap="buffer_one"`): bodies longer than its rate, so a fire always
  finds the previous run going: one waits, the later ones are skipped. Rule: never
  two fires waiting at once (the waiting slot's holders, `slot_stamps`).
* `alongside` (`overlap="allow_all"`): bodies longer than its rate, so runs overlap.
  Rule: each fire still runs once.
* `retried` (`retries=2`, `overlap="buffer_one"`): the first attempt of about half its
  fires fails, and some second attempts; the backoff puts some retries after the
  next fire, where they wait their turn. Rule: a retry never overlaps another run.
* `caught_up` (`catchup=`): the fires missed while the whole fleet was down
  (`fleet_down`) are run late. Rule: a caught-up fire runs once.
* `jittered` (`jitter=`): rule: a fire never starts before its instant plus its offset.

Rates, jitter and backoff scale with `FIREFLY_CHAOS_PACE`, as the mix's do.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from chaos_harness.tasks import LOCK_TTL, PACE, PREFIX, _body
from firefly_scheduling import current_fire, scheduled

#: Seconds between fires at pace 1, epoch-aligned.
RATES = {"buffered": 1.0, "alongside": 0.5, "retried": 1.0, "caught_up": 1.0, "jittered": 4.0}
#: A jittered fire's offset is drawn in `[0, this share of its rate)`.
JITTER_SHARE = 0.75
#: How far back a node that boots after the fleet was down catches fires up, and how
#: many of those it runs: a node's first boot also catches up the fires before the run.
CATCHUP_WINDOW = "1m"
CATCHUP_LIMIT = 20
#: The share of the first attempts of `retried` that fail (a second attempt fails
#: half as often).
FAILING_SHARE = 0.5


def _rate(name: str) -> float:
    return RATES[name] * PACE


def jitter_seconds(pace: float) -> float:
    """`jittered`'s jitter at `pace`."""
    return RATES["jittered"] * pace * JITTER_SHARE


@dataclass(frozen=True)
class PolicyTargets:
    """Which targets carry which policy, for the checker (`policy_rules`).

    Built from the names and `pace` alone: the harness never imports the tasks with
    the nodes' environment (their lock names carry the run's prefix).
    """

    alongside: frozenset[str] = frozenset()
    retried: frozenset[str] = frozenset()
    caught_up: frozenset[str] = frozenset()
    #: Target to jitter (seconds).
    jittered: tuple[tuple[str, float], ...] = ()


def policy_targets(pace: float) -> PolicyTargets:
    return PolicyTargets(
        alongside=frozenset({f"{__name__}:alongside"}),
        retried=frozenset({f"{__name__}:retried"}),
        caught_up=frozenset({f"{__name__}:caught_up"}),
        jittered=((f"{__name__}:jittered", jitter_seconds(pace)),),
    )


def schedules(pace: float) -> dict[str, float]:
    """Every policy task's target and period at `pace`: the fires the checker expects."""
    return {f"{__name__}:{name}": rate * pace for name, rate in RATES.items()}


@scheduled(
    fixed_rate=_rate("buffered"),
    lock=f"{PREFIX}-buffered",
    lock_ttl=LOCK_TTL,
    overlap="buffer_one",
)
def buffered() -> None:
    """Longer than its rate: every fire meets the previous run."""
    _body(random.uniform(1.2, 2.5) * PACE)


@scheduled(
    fixed_rate=_rate("alongside"),
    lock=f"{PREFIX}-alongside",
    lock_ttl=LOCK_TTL,
    overlap="allow_all",
)
def alongside() -> None:
    """Longer than its rate, on average: runs overlap."""
    _body(random.uniform(0.3, 1.5) * PACE)


@scheduled(
    fixed_rate=_rate("retried"),
    lock=f"{PREFIX}-retried",
    lock_ttl=LOCK_TTL,
    overlap="buffer_one",
    retries=2,
    retry_backoff=_rate("retried") * 0.6,
    retry_backoff_max=_rate("retried") * 1.5,
)
def retried() -> None:
    """Fails some first and second attempts after its body's end was stamped."""
    _body(random.uniform(0.2, 0.6) * PACE)
    attempt = _attempt()
    share = FAILING_SHARE if attempt == 1 else FAILING_SHARE / 2
    if attempt <= 2 and random.random() < share:
        raise RuntimeError(f"chaos: attempt {attempt} fails on purpose")


@scheduled(
    fixed_rate=_rate("caught_up"),
    lock=f"{PREFIX}-caught-up",
    lock_ttl=LOCK_TTL,
    catchup=CATCHUP_WINDOW,
    catchup_limit=CATCHUP_LIMIT,
)
def caught_up() -> None:
    _body(random.uniform(0.01, 0.1))


@scheduled(
    fixed_rate=_rate("jittered"),
    lock=f"{PREFIX}-jittered",
    lock_ttl=LOCK_TTL,
    jitter=jitter_seconds(PACE),
)
def jittered() -> None:
    _body(random.uniform(0.01, 0.1))


def _attempt() -> int:
    fire = current_fire()
    return 1 if fire is None else fire.attempt
