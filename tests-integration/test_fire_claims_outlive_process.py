"""A fire claim outlives the process that took it, on every backend, with no run history.

On PostgreSQL and MySQL a claim was a session lock, released when `tick`
exited (or gone with a restarted node's session). With the run history off, a second
`tick` later in the same minute ran the fire again. Here two `tick` processes run one
after the other in one minute, the history off; the first must run the fire and the
second must find it claimed.
"""

from __future__ import annotations

import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "host_apps"))
from firefly_hostapps.harness import node_env, read_runs, start_node

from backend_matrix import BACKENDS, lock_env, server_urls

pytestmark = pytest.mark.slow


@pytest.fixture
def backend_env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """The lock provider and URL variables of one backend."""
    backend = str(request.param)
    return lock_env(backend, server_urls(request, [backend]), tmp_path)


@pytest.mark.parametrize("backend_env", BACKENDS, indirect=True)
def test_a_second_tick_in_the_same_minute_finds_the_fire_claimed(
    tmp_path: Path, backend_env: dict[str, str]
) -> None:
    for attempt in range(3):  # both ticks must fall in one minute; a slow machine may need more
        log = tmp_path / f"runs-{attempt}.log"
        env = node_env(
            tmp_path,
            **backend_env,
            FIREFLY_SCHEDULING_HISTORY_URL="off",
            FIREFLY_HOSTAPP_LOCK=f"hostapps-claim-outlives-{uuid.uuid4().hex}",
            FIREFLY_HOSTAPP_LOG=str(log),
            FIREFLY_HOSTAPP_BODY="0.1",
        )
        if datetime.now(UTC).second > 40:
            time.sleep(60 - datetime.now(UTC).second + 0.2)
        minute = datetime.now(UTC).replace(second=0, microsecond=0)
        outputs = []
        for name in ("first", "second"):
            node = start_node(
                "tick",
                f"{name}-{attempt}",
                app="firefly_hostapps.tick_once",
                env=env,
                workdir=tmp_path,
            )
            assert node.wait(timeout=60) == 0, node.text()
            outputs.append(node.text())
        if datetime.now(UTC).replace(second=0, microsecond=0) == minute:
            break
    else:
        pytest.fail("three attempts ran past their minute: the two ticks never shared one")
    assert "1 succeeded" in outputs[0], outputs[0]
    assert "1 claimed elsewhere" in outputs[1], outputs[1]
    assert len(read_runs(log)) == 1, "\n".join(outputs)
