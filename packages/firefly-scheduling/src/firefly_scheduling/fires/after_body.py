"""What the record stage makes of the policy's answer after a body (`fires.retries`):
the retry `Fire` the host is handed, made once here, and the text of the record."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

from firefly_scheduling.fires.outcome import Fire, TriggerKind
from firefly_scheduling.fires.policy import BodyEnded, Run, RunAgain, Skip
from firefly_scheduling.fires.retries import due_text

logger = logging.getLogger("firefly_scheduling.fires")


@dataclass(frozen=True, slots=True)
class AfterRun:
    """What the policy's answer after a body means for the record and the host: the
    retry to run (None: none), and what the run's record says comes next."""

    fire: Fire | None
    next_step: str | None


#: No retry follows, and the record says nothing more.
NO_RETRY: Final = AfterRun(None, None)


def after_run(fire: Fire, ended: BodyEnded, answer: Run | RunAgain | Skip) -> AfterRun:
    """The retry `answer` asks for, made once here as a `Fire` for the host, and the
    text that goes into the record of the run that ended."""
    if isinstance(answer, RunAgain):
        retry = answer.retry
        again = Fire(fire.task, fire.instant, TriggerKind.RETRY, retry)
        logger.warning(
            "%s: fire %s %s (attempt %d); %s is due at %s",
            fire.target,
            fire.instant.isoformat(),
            ended.verdict.value,
            ended.attempt,
            retry,
            retry.due.isoformat(),
        )
        return AfterRun(again, due_text(retry))
    if isinstance(answer, Skip):
        logger.warning("%s: fire %s: %s", fire.target, fire.instant.isoformat(), answer.reason)
        return AfterRun(None, answer.reason)
    return NO_RETRY
