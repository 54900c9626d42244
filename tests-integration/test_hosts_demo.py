"""`firefly-scheduling demo` as a user runs it: three real node processes on SQLite."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPOSITORY = Path(__file__).resolve().parent.parent
_CLI = "import sys; from firefly_scheduling.cli import main; sys.exit(main())"


def test_the_demo_exits_0_with_no_duplicate_and_names_every_verdict(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FIREFLY_")}
    env["COLUMNS"] = "200"
    arguments = ["demo", "--nodes", "3", "--seconds", "8", "--path", str(REPOSITORY / "examples")]
    done = subprocess.run(
        [sys.executable, "-c", _CLI, *arguments],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
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
