"""`pause`, `resume` and `status` on real servers, checked by a second client of each."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner

from firefly_scheduling.cli import main
from firefly_scheduling_database.control_store import DatabaseControlStore
from firefly_scheduling_redis.control_store import RedisControlStore

PASSWORD = "cli-control-secret"


@pytest.mark.parametrize(
    ("url_fixture", "second_client"),
    [
        ("redis_url", RedisControlStore),
        ("redis_cluster_url", RedisControlStore),
        ("postgres_url", DatabaseControlStore),
        ("mysql_url", DatabaseControlStore),
    ],
)
def test_a_pause_from_the_command_line_is_read_by_another_client(
    url_fixture: str, second_client: Callable[[str], Any], request: pytest.FixtureRequest
) -> None:
    url: str = request.getfixturevalue(url_fixture)
    env = {"FIREFLY_SCHEDULING_CONTROL_URL": url}
    task = f"app.cli_{uuid.uuid4().hex}:job"
    runner = CliRunner()
    store = second_client(url)
    try:
        paused = runner.invoke(main, ["pause", task, "--by", "ops", "--note", "deploy"], env=env)
        assert paused.exit_code == 0, paused.output
        recorded = store.pause_of(task)
        assert recorded is not None
        assert (recorded.by, recorded.note) == ("ops", "deploy")
        assert task in runner.invoke(main, ["status"], env=env).output
        resumed = runner.invoke(main, ["resume", task], env=env)
        assert resumed.output.strip() == f"{task} resumed"
        assert store.pause_of(task) is None
    finally:
        store.close()


def test_an_unreachable_store_exits_1_without_the_password() -> None:
    env = {"FIREFLY_SCHEDULING_CONTROL_URL": f"redis://:{PASSWORD}@127.0.0.1:9/0"}
    result = CliRunner().invoke(main, ["status"], env=env)
    assert result.exit_code == 1, result.output
    assert "redis control store" in result.output
    assert PASSWORD not in result.output
