"""The one vocabulary of a fire's verdict, and where a verdict becomes a stored state."""

from __future__ import annotations

import pytest

from firefly_scheduling.fires.outcome import Verdict, verdict_words
from firefly_scheduling.fires.run_end import closing_state
from firefly_scheduling.history.port import RunState


def test_the_verdict_keys_that_json_and_the_fire_log_print_are_those_of_0_1_0() -> None:
    # `tick --json`, the fire log's `status` and telemetry spell a verdict by its
    # lower-cased name: these are public values and must not change.
    assert {verdict.name.lower() for verdict in Verdict} == {
        "succeeded",
        "failed",
        "timed_out",
        "cancelled",
        "claimed_elsewhere",
        "already_recorded",
        "overlapping",
        "too_late",
        "backend_error",
        "expired",
        "lock_lost",
        "paused",
        "held_back",
        "shutting_down",
        "unavailable",
    }


def test_every_verdict_reads_in_words_as_its_key_with_spaces() -> None:
    for verdict in Verdict:
        assert verdict.value == verdict.name.lower().replace("_", " ")
        assert verdict_words(verdict.name.lower()) == verdict.value


def test_only_the_body_running_counts_as_ran() -> None:
    assert {verdict for verdict in Verdict if verdict.ran} == {
        Verdict.SUCCEEDED,
        Verdict.FAILED,
        Verdict.TIMED_OUT,
        Verdict.CANCELLED,
    }


@pytest.mark.parametrize(
    ("verdict", "state"),
    [
        (Verdict.SUCCEEDED, RunState.SUCCEEDED),
        (Verdict.FAILED, RunState.FAILED),
        (Verdict.TIMED_OUT, RunState.TIMED_OUT),
        (Verdict.CANCELLED, RunState.CANCELLED),
        (Verdict.EXPIRED, RunState.EXPIRED),
        (Verdict.LOCK_LOST, RunState.EXPIRED),
    ],
)
def test_a_started_run_is_closed_with_the_state_of_its_verdict(
    verdict: Verdict, state: RunState
) -> None:
    assert closing_state(verdict) is state


def test_a_verdict_that_never_starts_a_run_cannot_close_one() -> None:
    with pytest.raises(ValueError, match="TOO_LATE never closes a started run"):
        closing_state(Verdict.TOO_LATE)
