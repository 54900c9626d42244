"""`overlap=` at boot: the values refused with exit 2 (naming the task, the value and the
allowed values), `schedule --json` and the manifest carrying the policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from firefly_scheduling.cli import main
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.manifest_format import decode, encode
from firefly_scheduling.tasks.validation import validate_descriptor

pytestmark = pytest.mark.usefixtures("isolated")

ALLOWED = "'skip', 'allow_all', 'buffer_one', 'buffer_all', 'cancel_other'"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"COLUMNS": "200"})


def write_app(isolated: Path, package: str, source: str) -> None:
    (isolated / package).mkdir()
    (isolated / package / "__init__.py").write_text(
        f"from firefly_scheduling import scheduled\n\n{source}"
    )


@pytest.mark.parametrize(
    ("package", "arguments", "message"),
    [
        (
            "unknown",
            'fixed_rate="1m", overlap="queue"',
            f"unknown:bad: overlap='queue' is not an overlap policy; expected one of {ALLOWED}",
        ),
        (
            "wrongcase",
            'fixed_rate="1m", overlap="Allow_All"',
            "wrongcase:bad: overlap='Allow_All' is not an overlap policy",
        ),
        (
            "cancelunlocked",
            'cron="* * * * *", lock=None, overlap="cancel_other"',
            "cancelunlocked:bad: overlap='cancel_other' needs a locked task",
        ),
        (
            "unlockedall",
            'cron="* * * * *", lock=False, overlap="buffer_all"',
            "unlockedall:bad: overlap='buffer_all' needs a locked task",
        ),
        (
            "unlocked",
            'fixed_rate="1m", lock=False, overlap="allow_all"',
            "unlocked:bad: overlap='allow_all' needs a locked task: an unlocked task "
            "(lock=False) runs on every node",
        ),
        (
            "delayed",
            'fixed_delay="1m", overlap="buffer_one"',
            "delayed:bad: overlap='buffer_one' does not apply to a fixed_delay task",
        ),
    ],
)
def test_a_bad_overlap_stops_the_boot_with_exit_2(
    isolated: Path, package: str, arguments: str, message: str
) -> None:
    write_app(isolated, package, f"@scheduled({arguments})\ndef bad():\n    pass\n")
    result = invoke("schedule", "--path", ".", "--app", package)
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


def test_overlap_skip_on_an_unlocked_task_is_the_default_and_accepted() -> None:
    descriptor = ScheduledDescriptor("a.m:f", fixed_rate=60.0, overlap="skip")
    assert validate_descriptor(descriptor).overlap is None


def test_a_manifest_with_an_unknown_overlap_is_refused_naming_the_task() -> None:
    document = json.loads(encode([ScheduledDescriptor("a.m:f", fixed_rate=60.0)], ["a"]))
    document["schedules"][0]["overlap"] = "replace"
    with pytest.raises(ConfigurationError, match=r"a\.m:f: overlap='replace' is not an overlap"):
        decode(document)


def test_schedule_json_and_the_manifest_carry_each_task_s_overlap(isolated: Path) -> None:
    write_app(
        isolated,
        "overlapapp",
        '@scheduled(fixed_rate="1m", overlap="allow_all")\ndef alongside():\n    pass\n\n'
        '@scheduled(fixed_rate="1m", overlap="buffer_one")\ndef buffered():\n    pass\n\n'
        '@scheduled(fixed_rate="1m")\ndef plain():\n    pass\n',
    )
    listed = invoke("schedule", "--path", ".", "--app", "overlapapp", "--json")
    assert listed.exit_code == 0, listed.output
    rows = {row["target"]: row["overlap"] for row in map(json.loads, listed.output.splitlines())}
    assert rows == {
        "overlapapp:alongside": "allow_all",
        "overlapapp:buffered": "buffer_one",
        "overlapapp:plain": "skip",
    }
    cached = invoke("cache", "--path", ".", "--app", "overlapapp")
    assert cached.exit_code == 0, cached.output
    manifest = json.loads((isolated / ".firefly" / "scheduled.json").read_text())
    _, descriptors = decode(manifest)
    assert {d.target: d.overlap for d in descriptors} == {
        "overlapapp:alongside": "allow_all",
        "overlapapp:buffered": "buffer_one",
        "overlapapp:plain": None,
    }
