"""scan, ScheduledManifest and resolve_descriptors over generated application packages."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from firefly_scheduling import ConfigurationError, ScheduledDescriptor, ScheduledManifest, scan
from firefly_scheduling.settings import Settings
from firefly_scheduling.tasks.discovery import resolve_descriptors
from firefly_scheduling.tasks.manifest_format import FORMAT, SCHEDULE_FIELDS, VERSION

MakePackage = Callable[[dict[str, str]], str]

APP_FILES = {
    "__init__.py": "from .billing.invoices import send_invoices  # a re-export\n",
    "__main__.py": "raise SystemExit('__main__ must never be imported by the scanner')\n",
    "billing/__init__.py": "",
    "billing/invoices.py": """
        from firefly_scheduling import scheduled

        @scheduled(cron="0 3 * * 7", zone="Europe/Paris", lock=True)
        def send_invoices():
            pass

        def helper():  # not a task
            pass
    """,
    "billing/reports.py": """
        from firefly_scheduling import scheduled
        from ..billing.invoices import send_invoices as imported_elsewhere

        class Reports:
            @scheduled(fixed_rate="5m", lock="reports", lock_ttl="2m")
            def hourly(self):
                pass

            @scheduled(fixed_delay=30)
            @staticmethod
            def tidy():
                pass

            def not_a_task(self):
                pass

            class Archive:
                @scheduled(fixed_rate="1d", initial_delay="PT1H", lock=False)
                def compact(self):
                    pass
    """,
    "alerts.py": """
        from firefly_scheduling import scheduled

        @scheduled(fixed_rate="250ms", lock=False)
        def watch():
            pass
    """,
}


@pytest.fixture
def make_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MakePackage]:
    """Write a uniquely named package from {relative path: source}; return its name."""
    created: list[str] = []
    monkeypatch.syspath_prepend(str(tmp_path))

    def make(files: dict[str, str]) -> str:
        name = f"scanapp_{uuid.uuid4().hex[:12]}"
        for relative, source in files.items():
            path = tmp_path / name / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(source))
        created.append(name)
        return name

    yield make
    for module in [m for m in sys.modules if any(m.startswith(name) for name in created)]:
        del sys.modules[module]


def expected_tasks(package: str) -> list[ScheduledDescriptor]:
    return [
        ScheduledDescriptor(target=f"{package}.alerts:watch", fixed_rate=0.25),
        ScheduledDescriptor(
            target=f"{package}.billing.invoices:send_invoices",
            cron="0 3 * * 7",
            zone="Europe/Paris",
            lock_name=f"{package}.billing.invoices:send_invoices",
            lock_ttl=30.0,
        ),
        ScheduledDescriptor(
            target=f"{package}.billing.reports:Reports.Archive.compact",
            fixed_rate=86400.0,
            initial_delay=3600.0,
        ),
        ScheduledDescriptor(
            target=f"{package}.billing.reports:Reports.hourly",
            fixed_rate=300.0,
            lock_name="reports",
            lock_ttl=120.0,
        ),
        ScheduledDescriptor(  # locked by default, under its own target
            target=f"{package}.billing.reports:Reports.tidy",
            fixed_delay=30.0,
            lock_name=f"{package}.billing.reports:Reports.tidy",
            lock_ttl=30.0,
        ),
    ]


def test_scan_finds_functions_and_methods_once_in_target_order(make_package: MakePackage) -> None:
    package = make_package(APP_FILES)
    found = scan([package])
    assert found == expected_tasks(package)
    assert scan([package, package]) == found  # scanning twice adds no duplicate


def test_scan_of_several_packages_and_of_a_single_module(make_package: MakePackage) -> None:
    first, second = make_package(APP_FILES), make_package(APP_FILES)
    both = scan([second, first])
    assert [d.target for d in both] == sorted(d.target for d in both)
    assert len(both) == 10
    assert scan([f"{first}.alerts"]) == [expected_tasks(first)[0]]


def test_scan_of_a_package_without_tasks_is_empty(make_package: MakePackage) -> None:
    assert scan([make_package({"__init__.py": "", "plain.py": "def f():\n    pass\n"})]) == []


def test_an_import_error_names_the_module_being_scanned(make_package: MakePackage) -> None:
    package = make_package(
        {"__init__.py": "", "good.py": "", "sub/__init__.py": "", "sub/broken.py": "1/0\n"}
    )
    with pytest.raises(ConfigurationError) as raised:
        scan([package])
    message = str(raised.value)
    assert f"'{package}.sub.broken' of '{package}'" in message
    assert "ZeroDivisionError" in message


def test_a_missing_package_is_named() -> None:
    with pytest.raises(ConfigurationError, match="importing module 'no_such_scan_pkg' failed"):
        scan(["no_such_scan_pkg"])
    with pytest.raises(ConfigurationError, match="empty package name"):
        scan([" "])


def test_a_bad_decorator_in_application_code_names_module_and_target(
    make_package: MakePackage,
) -> None:
    package = make_package(
        {
            "__init__.py": "",
            "jobs.py": "from firefly_scheduling import scheduled\n\n"
            "@scheduled(cron='0 0 * * * *')\ndef nightly():\n    pass\n",
        }
    )
    with pytest.raises(ConfigurationError) as raised:
        scan([package])
    assert f"importing module '{package}.jobs'" in str(raised.value)
    assert f"{package}.jobs:nightly: cron '0 0 * * * *' has 6 fields" in str(raised.value)


# -- the manifest ------------------------------------------------------------------------


def test_compile_then_load_round_trips(make_package: MakePackage, tmp_path: Path) -> None:
    package = make_package(APP_FILES)
    path = tmp_path / "deep" / "dir" / "scheduled.json"
    compiled = ScheduledManifest.compile(scan([package]), path, packages=[package])
    loaded = ScheduledManifest.load(path)
    assert loaded.descriptors == tuple(expected_tasks(package))
    assert loaded.descriptors == compiled.descriptors
    assert loaded.packages == (package,)
    assert loaded.path == path
    document = json.loads(path.read_text())
    assert (document["format"], document["version"]) == (FORMAT, VERSION)
    assert document["schedules"][0] == {"fixed_rate": 0.25}
    assert document["tasks"][0] == [f"{package}.alerts:watch", 0, None]
    assert document["tasks"][1] == [f"{package}.billing.invoices:send_invoices", 1, True]
    assert document["tasks"][3][2] == "reports"


def test_the_format_stores_every_descriptor_field() -> None:
    fields = {field.name for field in dataclasses.fields(ScheduledDescriptor)}
    assert fields == {*SCHEDULE_FIELDS, "target", "lock_name"}


def test_tasks_sharing_a_schedule_keep_their_own_lock(tmp_path: Path) -> None:
    tasks = [
        ScheduledDescriptor(target="a.m:f", fixed_rate=5.0, lock_name="a.m:f", lock_ttl=9.0),
        ScheduledDescriptor(target="a.m:g", fixed_rate=5.0, lock_name="shared", lock_ttl=9.0),
        ScheduledDescriptor(target="a.m:h", fixed_rate=5.0),
        ScheduledDescriptor(target="a.m:i", fixed_rate=5.0, lock_name="a.m:i", lock_ttl=9.0),
    ]
    path = tmp_path / "scheduled.json"
    ScheduledManifest.compile(tasks, path)
    document = json.loads(path.read_text())
    assert document["schedules"] == [{"fixed_rate": 5.0, "lock_ttl": 9.0}, {"fixed_rate": 5.0}]
    assert [row[1:] for row in document["tasks"]] == [
        [0, True],
        [0, "shared"],
        [1, None],
        [0, True],
    ]
    assert ScheduledManifest.load(path).descriptors == tuple(tasks)


def test_compile_is_deterministic_atomic_and_readable(tmp_path: Path) -> None:
    tasks = [
        ScheduledDescriptor(target="b.m:f", fixed_rate=1.0),
        ScheduledDescriptor(target="a.m:f", cron="@daily"),
    ]
    path = tmp_path / "scheduled.json"
    ScheduledManifest.compile(tasks, path)
    first = path.read_bytes()
    ScheduledManifest.compile(reversed(tasks), path)
    assert path.read_bytes() == first
    assert os.listdir(tmp_path) == ["scheduled.json"]  # no temporary file left behind
    assert path.stat().st_mode & 0o777 == 0o644
    assert [d.target for d in ScheduledManifest.load(path).descriptors] == ["a.m:f", "b.m:f"]


def test_compile_validates_and_refuses_conflicting_targets(tmp_path: Path) -> None:
    path = tmp_path / "scheduled.json"
    with pytest.raises(ConfigurationError, match=r"share the target a\.m:f"):
        ScheduledManifest.compile(
            [
                ScheduledDescriptor(target="a.m:f", fixed_rate=1.0),
                ScheduledDescriptor(target="a.m:f", fixed_rate=2.0),
            ],
            path,
        )
    with pytest.raises(ConfigurationError, match=r"a\.m:f: cron"):
        ScheduledManifest.compile([ScheduledDescriptor(target="a.m:f", cron="bad")], path)
    assert not path.exists()


def test_loading_imports_no_application_module(make_package: MakePackage, tmp_path: Path) -> None:
    package = make_package(APP_FILES)
    path = tmp_path / "scheduled.json"
    ScheduledManifest.compile(scan([package]), path, packages=[package])
    program = textwrap.dedent(
        f"""
        import json, sys
        from firefly_scheduling import ScheduledManifest
        manifest = ScheduledManifest.load({str(path)!r})
        imported = sorted(name for name in sys.modules if name.startswith({package!r}))
        print(json.dumps([len(manifest.descriptors), imported]))
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    result = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    assert json.loads(result.stdout) == [5, []]


def manifest_text(schedules: object, tasks: object, **extra: object) -> str:
    return json.dumps(
        {"format": FORMAT, "version": VERSION, "schedules": schedules, "tasks": tasks, **extra}
    )


RATE = [{"fixed_rate": 1.0}]


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("{not json", "cannot be read"),
        ("[]", "not a firefly-scheduling manifest"),
        (json.dumps({"format": "other", "version": 1, "tasks": []}), "not a firefly-scheduling"),
        (json.dumps({"format": FORMAT, "version": 2, "tasks": []}), "unknown version 2"),
        (json.dumps({"format": FORMAT, "tasks": []}), "unknown version None"),
        (manifest_text(RATE, {}), "'tasks' must be a list"),
        (manifest_text({}, []), "'schedules' must be a list"),
        (manifest_text(RATE, [], packages="x"), "'packages' must be a list"),
        (manifest_text([5], []), "a schedule must be an object"),
        (manifest_text([{"fixed_rate": 1.0, "every": 2}], []), "unknown fields ['every']"),
        (manifest_text(RATE, [5]), "a task must be [target, schedule, lock]"),
        (manifest_text(RATE, [["a.m:f", 0]]), "a task must be [target, schedule, lock]"),
        (manifest_text(RATE, [["a.m:f", 1, None]]), "'a.m:f' names no schedule: 1"),
        (manifest_text(RATE, [["a.m:f", True, None]]), "names no schedule"),
        (manifest_text(RATE, [["a.m:f", 0, 5]]), "lock must be null, true or a name"),
        (manifest_text(RATE, [["a.m:f", 0, None], ["a.m:f", 0, None]]), "unique and sorted"),
        (manifest_text(RATE, [["b.m:f", 0, None], ["a.m:f", 0, None]]), "unique and sorted"),
        (manifest_text([{"cron": "@boot"}], [["a.m:f", 0, None]]), "a.m:f: cron '@boot'"),
        (
            manifest_text([{"fixed_rate": "1s"}], [["a.m:f", 0, None]]),
            "a.m:f fixed_rate: expected a number of seconds",
        ),
        (manifest_text(RATE, [["a.m:f", 0, ""]]), "a.m:f: lock name must not be empty"),
        (manifest_text(RATE, [[7, 0, None]]), "a task target must be a str"),
        (manifest_text(RATE, [["a.m:f", 0, None], ["a.m:g.<locals>.h", 0, None]]), "<locals>"),
        (
            manifest_text(RATE, [["a.m:f", 0, None], ["a.m:g", 0, "x" * 300]]),
            "a.m:g: lock name is 300 characters long",
        ),
        (
            manifest_text([{"fixed_rate": 1.0, "lock_ttl": 5.0}], [["a.m:f", 0, None]]),
            "a.m:f: lock_ttl=5.0 is given but the task is not locked",
        ),
        (
            manifest_text(
                [{"fixed_rate": 1.0, "lock_ttl": 5.0}], [["a.m:f", 0, True], ["a.m:g", 0, None]]
            ),
            "a.m:g: lock_ttl=5.0 is given but the task is not locked",
        ),
    ],
)
def test_load_refuses_malformed_files_naming_the_path(
    tmp_path: Path, content: str, fragment: str
) -> None:
    path = tmp_path / "scheduled.json"
    path.write_text(content)
    with pytest.raises(ConfigurationError) as raised:
        ScheduledManifest.load(path)
    assert f"manifest {path}" in str(raised.value)
    assert fragment in str(raised.value)


def test_load_of_a_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=f"no manifest at {tmp_path / 'none.json'}"):
        ScheduledManifest.load(tmp_path / "none.json")


def test_stale_reason(tmp_path: Path) -> None:
    tasks = [
        ScheduledDescriptor(target="a.m:f", fixed_rate=1.0),
        ScheduledDescriptor(target="a.m:g", cron="@daily"),
    ]
    manifest = ScheduledManifest.compile(tasks, tmp_path / "scheduled.json")
    assert manifest.stale_reason(tasks) is None
    changed = [
        replace(tasks[0], fixed_rate=2.0),
        ScheduledDescriptor(target="a.m:h", cron="@hourly"),
    ]
    reason = manifest.stale_reason(changed)
    assert reason is not None
    assert "added: a.m:h" in reason
    assert "removed: a.m:g" in reason
    assert "changed: a.m:f" in reason


# -- resolution order ----------------------------------------------------------------------


def test_resolution_prefers_the_manifest_then_the_scan(
    make_package: MakePackage, tmp_path: Path
) -> None:
    package = make_package(APP_FILES)
    manifest_path = tmp_path / "m" / "scheduled.json"
    settings = Settings(scan_packages=(package,), manifest_path=manifest_path)

    scanned = resolve_descriptors(settings)
    assert scanned.descriptors == tuple(expected_tasks(package))
    assert f"5 tasks from a scan of {package} (from FIREFLY_SCAN_PACKAGES)" == scanned.explanation

    only_one = [ScheduledDescriptor(target="x.y:z", fixed_rate=5.0)]
    ScheduledManifest.compile(only_one, manifest_path)
    from_manifest = resolve_descriptors(settings)
    assert from_manifest.descriptors == tuple(only_one)
    assert from_manifest.explanation.startswith(
        f"1 task from the compiled manifest {manifest_path} (compiled from descriptors given"
    )
    assert f"FIREFLY_SCAN_PACKAGES={package} is ignored" in from_manifest.explanation

    explicit = resolve_descriptors(settings, packages=[package])
    assert explicit.descriptors == tuple(expected_tasks(package))
    assert "given on the command line" in explicit.explanation


def test_nothing_configured_says_why(tmp_path: Path) -> None:
    path = tmp_path / "absent.json"
    descriptors, explanation = resolve_descriptors(Settings(manifest_path=path))
    assert descriptors == ()
    assert "FIREFLY_SCAN_PACKAGES is not set" in explanation
    assert f"no manifest at {path}" in explanation


def test_a_scan_without_tasks_says_so(make_package: MakePackage, tmp_path: Path) -> None:
    package = make_package({"__init__.py": ""})
    settings = Settings(scan_packages=(package,), manifest_path=tmp_path / "absent.json")
    descriptors, explanation = resolve_descriptors(settings)
    assert descriptors == ()
    assert f"no @scheduled function or method in {package}" in explanation
