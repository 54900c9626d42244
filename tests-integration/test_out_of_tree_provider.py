"""A provider written outside this repository needs no edit to core.

`out_of_tree/firefly-flock-example` is a throwaway third-party distribution: a lock,
its own anchor store and a `LockProvider` descriptor, nothing else. This builds it
into a wheel, installs the wheel into a directory of its own (a real distribution,
entry points read from its metadata), and runs core's shipped contract suites
against it in a fresh interpreter.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

#: Long, with no timing of its own: it builds a wheel and runs the contract suites
#: in a nested pytest.
pytestmark = pytest.mark.early

EXAMPLE = Path(__file__).parent / "out_of_tree" / "firefly-flock-example"


def _uv() -> list[str]:
    found = shutil.which("uv")
    if found is None:
        pytest.fail("uv is needed to build the example provider (scripts/bootstrap installs it)")
    return [found]


def _run(
    command: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, capture_output=True, text=True, timeout=600, check=False, env=env, cwd=cwd
    )


def test_an_installed_out_of_tree_provider_passes_the_contract_suites(tmp_path: Path) -> None:
    built = _run([*_uv(), "build", "--wheel", "--out-dir", str(tmp_path / "dist"), str(EXAMPLE)])
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("firefly_flock_example-*.whl")
    site = tmp_path / "site"
    installed = _run(
        [*_uv(), "pip", "install", "--no-deps", "--target", str(site), str(wheel)],
        env={**os.environ, "UV_PYTHON": sys.executable},
    )
    assert installed.returncode == 0, installed.stderr
    assert (site / "firefly_flock_example-0.0.1.dist-info" / "entry_points.txt").exists()

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *sys.path])}
    checks = _run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(EXAMPLE / "tests" / "contract_checks.py"),
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
        ],
        env=env,
        cwd=tmp_path,
    )
    assert checks.returncode == 0, checks.stdout[-4000:] + checks.stderr[-2000:]
    assert " passed" in checks.stdout
    assert " failed" not in checks.stdout
