"""Python child processes for the tests that need a separate interpreter (a Django
project, a node script, the demo CLI).

`run_python` runs one to its end with its output kept and a timeout, so a hung child
fails its test instead of the whole run; its exit status is left to the caller's
assertion, which can then show the output. A node script takes its orders as JSON in
one environment variable (`orders_env`), and `start_python` starts one left running.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path


def run_python(
    arguments: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    python: str = sys.executable,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """`python arguments...` run to its end with text output captured; never raises on
    a non-zero exit (the caller asserts on `returncode` and shows the output)."""
    return subprocess.run(
        [python, *arguments],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def orders_env(variable: str, orders: Mapping[str, object]) -> dict[str, str]:
    """This process's environment plus a node script's `orders`, as JSON in `variable`."""
    return {**os.environ, variable: json.dumps(orders)}


def start_python(script: Path, *, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """`python script` started and left running, its output going where the test's goes."""
    return subprocess.Popen([sys.executable, str(script)], env=env)
