"""A shared, append-only record of fires: one JSON line per fire a node handled.

Used by `firefly-scheduling run --fire-log PATH` and the demo, where several node
processes append to one local file and the demo reads it to show who ran what.
Each record is written with a single `write` on a file opened with `O_APPEND`, which
Linux and macOS apply atomically for a local file, so lines from different
processes never interleave. It is a debugging and demo aid, not run history: it is
not safe on a network filesystem.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from firefly_scheduling.fires.outcome import FireResult


@dataclass(frozen=True)
class FireRecord:
    """One line of a fire log.

    `status` is the verdict's lower-cased name (`succeeded`, `claimed_elsewhere`,
    `too_late`, `overlapping`, `held_back`...: `fires.outcome.Verdict`).
    `adoption`: the run of a died node's fire, taken over here.
    `claim_seconds`: how long this node waited for the fire's claim, round trip
    included (a batch's, when the claim went in one); None without a claim.
    """

    target: str
    instant: str
    node: str
    ran: bool
    locked: bool
    started_at: str | None
    ended_at: str | None
    status: str = ""
    adoption: bool = False
    claim_seconds: float | None = None

    @classmethod
    def of(cls, result: FireResult) -> FireRecord:
        def iso(instant: datetime | None) -> str | None:
            return None if instant is None else instant.isoformat(timespec="microseconds")

        return cls(
            target=result.fire.target,
            instant=result.fire.instant.isoformat(timespec="microseconds"),
            node=result.node,
            ran=result.ran,
            locked=result.fire.task.lock_name is not None,
            started_at=iso(result.started_at),
            ended_at=iso(result.ended_at),
            status=result.verdict.name.lower(),
            adoption=result.adoption,
            claim_seconds=result.claim_seconds,
        )


class FireLog:
    """A `FireObserver` appending every result to `path`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fire_finished(self, result: FireResult) -> None:
        line = json.dumps(FireRecord.of(result).__dict__, separators=(",", ":")) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def __repr__(self) -> str:
        return f"FireLog({str(self.path)!r})"


def read_fire_log(path: Path, *, offset: int = 0) -> tuple[list[FireRecord], int]:
    """The complete records from byte `offset` on, and the offset after the last one.

    A line still being written (no newline yet) is left for the next read.
    """
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            data = handle.read()
    except FileNotFoundError:
        return [], offset
    complete = data[: data.rfind(b"\n") + 1]
    return list(_parse(complete)), offset + len(complete)


def _parse(data: bytes) -> Iterator[FireRecord]:
    for line in data.decode().splitlines():
        if line.strip():
            fields = json.loads(line)
            # A key this version does not write (`outcome`, from 0.1.0) is passed over.
            yield FireRecord(**{key: fields[key] for key in _FIELDS if key in fields})


_FIELDS = frozenset(field.name for field in dataclasses.fields(FireRecord))
