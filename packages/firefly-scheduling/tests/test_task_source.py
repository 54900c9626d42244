"""Where the tasks came from is said at boot, and a stale manifest never wins in silence.

The report: a task added to a package never ran, because a manifest compiled before
it won over `FIREFLY_SCAN_PACKAGES`, and nothing in the log said where the tasks
came from. `cache` wrote a 0-task manifest with exit 0, and `run` then exited 2
without advice.

Now the boot line names the source (the manifest and its path, or a scan of which
packages) and what was ignored; a manifest whose packages' sources changed after it
was compiled draws a WARNING naming it and `firefly-scheduling cache`, and is
refused under `FIREFLY_SCHEDULING_STRICT=true`; `cache` refuses to write no task.
"""

from __future__ import annotations

import logging
import os
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from firefly_scheduling import ScheduledManifest, scan
from firefly_scheduling.cli import main

MakePackage = Callable[[dict[str, str]], str]

ONE_TASK = """
    from firefly_scheduling import scheduled

    @scheduled(cron="* * * * *")
    def first():
        pass
"""
ANOTHER_TASK = """
    from firefly_scheduling import scheduled

    @scheduled(cron="* * * * *")
    def second():
        pass
"""


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for variable in [name for name in os.environ if name.startswith("FIREFLY_")]:
        if not variable.startswith("FIREFLY_TEST_"):
            monkeypatch.delenv(variable)
    monkeypatch.setenv("FIREFLY_SCHEDULING_MANIFEST", str(tmp_path / "scheduled.json"))
    monkeypatch.setenv("FIREFLY_SCHEDULING_LOCK_PROVIDER", "memory")
    monkeypatch.setenv("FIREFLY_SCHEDULING_HISTORY_URL", "off")
    return tmp_path


@pytest.fixture
def make_package(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MakePackage]:
    """Write a uniquely named package from {relative path: source}; return its name."""
    created: list[str] = []
    monkeypatch.syspath_prepend(str(workdir))

    def make(files: dict[str, str]) -> str:
        name = f"sourceapp_{uuid.uuid4().hex[:12]}"
        for relative, source in files.items():
            path = workdir / name / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(source))
        created.append(name)
        return name

    yield make
    for module in [m for m in sys.modules if any(m.startswith(name) for name in created)]:
        del sys.modules[module]


def add_task(workdir: Path, package: str) -> None:
    """A new module with a new task, as a developer adds one after compiling."""
    (workdir / package / "added.py").write_text(textwrap.dedent(ANOTHER_TASK))


def compile_manifest(package: str) -> None:
    result = CliRunner().invoke(main, ["cache", "--app", package])
    assert result.exit_code == 0, result.output


def test_a_manifest_older_than_its_sources_is_a_warning_naming_it_and_the_fix(
    make_package: MakePackage, workdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    package = make_package({"__init__.py": "", "tasks.py": ONE_TASK})
    compile_manifest(package)
    add_task(workdir, package)
    with caplog.at_level(logging.INFO, logger="firefly_scheduling"):
        result = CliRunner().invoke(main, ["tick"])
    assert result.exit_code == 0, result.output
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    stale = [message for message in warnings if "may be stale" in message]
    assert len(stale) == 1, warnings
    assert str(workdir / "scheduled.json") in stale[0]
    assert package in stale[0]
    assert "firefly-scheduling cache" in stale[0]


@pytest.mark.parametrize("command", ["run", "tick"])
def test_a_stale_manifest_is_refused_under_strict(
    command: str, make_package: MakePackage, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = make_package({"__init__.py": "", "tasks.py": ONE_TASK})
    compile_manifest(package)
    add_task(workdir, package)
    monkeypatch.setenv("FIREFLY_SCHEDULING_STRICT", "true")
    result = CliRunner().invoke(main, [command])
    assert result.exit_code == 2, result.output
    assert "may be stale" in result.output
    assert "firefly-scheduling cache" in result.output


def test_a_fresh_manifest_draws_no_warning(
    make_package: MakePackage, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = make_package({"__init__.py": "", "tasks.py": ONE_TASK})
    compile_manifest(package)
    monkeypatch.setenv("FIREFLY_SCHEDULING_STRICT", "true")
    with caplog.at_level(logging.WARNING, logger="firefly_scheduling"):
        result = CliRunner().invoke(main, ["tick"])
    assert result.exit_code == 0, result.output
    assert "stale" not in caplog.text


def test_the_boot_line_names_the_manifest_and_what_it_overrides(
    make_package: MakePackage,
    workdir: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    package = make_package({"__init__.py": "", "tasks.py": ONE_TASK})
    compile_manifest(package)
    other = make_package({"__init__.py": "", "tasks.py": ANOTHER_TASK})
    monkeypatch.setenv("FIREFLY_SCAN_PACKAGES", other)
    with caplog.at_level(logging.INFO, logger="firefly_scheduling"):
        CliRunner().invoke(main, ["tick"])
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("tasks: ")]
    assert len(lines) == 1, caplog.text
    line = lines[0]
    assert f"from the compiled manifest {workdir / 'scheduled.json'}" in line
    assert f"compiled from {package}" in line
    assert f"FIREFLY_SCAN_PACKAGES={other} is ignored" in line
    assert "firefly-scheduling cache" in line
    # The packages differ: the manifest may not hold what the variable names.
    assert f"FIREFLY_SCAN_PACKAGES names {other}" in caplog.text


def test_the_boot_line_names_a_scan_and_the_manifest_it_passes_over(
    make_package: MakePackage,
    workdir: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    package = make_package({"__init__.py": "", "tasks.py": ONE_TASK})
    compile_manifest(package)
    with caplog.at_level(logging.INFO, logger="firefly_scheduling"):
        CliRunner().invoke(main, ["tick", "--app", package])
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("tasks: ")]
    assert lines == [
        f"tasks: 1 task from a scan of {package} (given on the command line); the manifest "
        f"{workdir / 'scheduled.json'} is ignored"
    ]


def test_cache_refuses_to_write_a_manifest_without_tasks(
    make_package: MakePackage, workdir: Path
) -> None:
    package = make_package({"__init__.py": ""})
    result = CliRunner().invoke(main, ["cache", "--app", package])
    assert result.exit_code == 2, result.output
    assert f"no @scheduled task in {package}" in result.output
    assert "nothing written" in result.output
    assert not (workdir / "scheduled.json").exists()


@pytest.mark.parametrize("command", ["run", "tick"])
def test_a_manifest_without_tasks_is_refused_with_advice(command: str, workdir: Path) -> None:
    ScheduledManifest.compile([], workdir / "scheduled.json", packages=["gone"])
    result = CliRunner().invoke(main, [command])
    assert result.exit_code == 2, result.output
    assert f"the manifest {workdir / 'scheduled.json'} holds no task" in result.output
    assert "firefly-scheduling cache" in result.output


def test_a_scan_without_tasks_says_what_to_check(
    make_package: MakePackage, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = make_package({"__init__.py": ""})
    monkeypatch.setenv("FIREFLY_SCAN_PACKAGES", package)
    result = CliRunner().invoke(main, ["run"])
    assert result.exit_code == 2, result.output
    assert f"no @scheduled function or method in {package}" in result.output
    assert "check" in result.output


def test_the_fingerprint_reads_the_sources_without_importing_them(
    make_package: MakePackage, workdir: Path
) -> None:
    package = make_package({"__init__.py": "raise SystemExit('imported')\n", "x.py": ""})
    from firefly_scheduling.tasks.manifest_sources import source_fingerprint  # noqa: PLC0415

    first = source_fingerprint([package])
    assert first is not None
    assert package not in sys.modules
    (workdir / package / "x.py").write_text("# changed\n")
    assert source_fingerprint([package]) != first
    assert source_fingerprint([f"{package}.x"]) is not None
    assert source_fingerprint(["no_such_package_here"]) is None
    assert scan  # the scanner, by contrast, imports (tested elsewhere)
