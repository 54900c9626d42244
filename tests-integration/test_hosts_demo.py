"""`firefly-scheduling demo` as a user runs it: real node processes on SQLite.

Every run starts from an empty temporary directory, as after a `pip install`: the
demo must find its app without the repository.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from python_runs import run_python

pytestmark = pytest.mark.slow

REPOSITORY = Path(__file__).resolve().parent.parent
CORE = REPOSITORY / "packages" / "firefly-scheduling"
_CLI = "import sys; from firefly_scheduling.cli import main; sys.exit(main())"


def demo(
    tmp_path: Path, *arguments: str, python: str = sys.executable
) -> subprocess.CompletedProcess[str]:
    """Run the demo from an empty directory, its temporary files kept under `tmp_path`."""
    cwd = tmp_path / "cwd"
    temporary = tmp_path / "tmp"
    cwd.mkdir()
    temporary.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FIREFLY_")}
    env.update(COLUMNS="200", TMPDIR=str(temporary))
    return run_python(["-c", _CLI, "demo", *arguments], env=env, cwd=cwd, python=python)


def test_the_demo_runs_from_any_directory_with_no_duplicate_and_names_every_verdict(
    tmp_path: Path,
) -> None:
    done = demo(tmp_path, "--nodes", "3", "--seconds", "8")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    # A heartbeat fire that a node lost the claim of was run by another node.
    fires = [
        line for line in output.splitlines() if re.match(r"\d\d:\d\d:\d\d\.\d{3}  heartbeat", line)
    ]
    contested = [line for line in fires if "claimed elsewhere" in line]
    assert contested, output
    assert all("succeeded" in line for line in contested), output
    # warm_cache has a 30 s initial delay on a fresh database: held back on every node.
    delayed = [line for line in output.splitlines() if re.match(r"\S+  warm_cache ", line)]
    assert all("held back" in line and "succeeded" not in line for line in delayed), output
    row = next(line for line in output.splitlines() if "tasks:heartbeat" in line)
    cells = [cell.strip() for cell in row.split("│")]
    assert cells[2] == "yes"
    assert int(cells[4]) >= 4, row  # runs
    assert cells[5] == "0", row  # duplicates
    # Nothing failed, so nothing is left behind.
    assert list((tmp_path / "tmp").iterdir()) == []


def test_a_failed_node_keeps_its_log_and_the_demo_prints_its_path(tmp_path: Path) -> None:
    done = demo(tmp_path, "--nodes", "1", "--seconds", "10", "--app", "firefly_no_such_app")
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "node-1 failed (exit 2); its log: " in output, output
    logs = [Path(path) for path in re.findall(r"(/\S+/node-1\.log)", output)]
    assert len(logs) == 1, output
    log = logs[0]
    assert log.is_file(), f"{log} was printed but deleted:\n{output}"
    assert log.parent.parent == tmp_path / "tmp"
    assert "No module named 'firefly_no_such_app'" in log.read_text(), log.read_text()
    # The node's own error is shown too, not only where to find it.
    assert "No module named 'firefly_no_such_app'" in output, output


@pytest.fixture(scope="module")
def core_only_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A fresh virtualenv holding the core distribution alone: no sibling, no extra."""
    uv = os.environ.get("UV") or shutil.which("uv")
    if uv is None:
        pytest.skip("uv is needed to build a virtualenv without the database sibling")
    venv = tmp_path_factory.mktemp("core-only") / "venv"
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run(
        [uv, "pip", "install", "--quiet", "--python", python, "--editable", str(CORE)], check=True
    )
    return python


def test_without_the_database_extra_the_demo_names_the_extra_and_exits_2(
    tmp_path: Path, core_only_python: str
) -> None:
    done = demo(tmp_path, python=core_only_python)
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "pip install 'firefly-scheduling[database]'" in output, output
    assert "demo" in output, output
    # The user set no provider: the message must not blame a variable they never set.
    assert "FIREFLY_SCHEDULING_LOCK_PROVIDER" not in output, output
    assert list((tmp_path / "tmp").iterdir()) == []


def test_version_lists_the_core_alone_when_no_sibling_is_installed(core_only_python: str) -> None:
    done = run_python(["-c", _CLI, "--version"], python=core_only_python, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout
    assert re.fullmatch(r"firefly-scheduling \d+\.\d+\.\d+", lines[0]), done.stdout
