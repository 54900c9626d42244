"""`retries=`, `retry_backoff=`, `retry_backoff_max=`: the decorator, boot validation (exit
2 naming the task and the value), the manifest and `schedule --json`; and the backoff's
draw, the same on every node and within its bounds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from firefly_scheduling import ConfigurationError, DurationError, ScheduledDescriptor, scheduled
from firefly_scheduling.cli import main
from firefly_scheduling.schedule.retry_backoff import backoff_cap, retry_delay
from firefly_scheduling.tasks.decorator import descriptor_of
from firefly_scheduling.tasks.manifest_format import decode, encode
from firefly_scheduling.tasks.retry_arguments import RetrySettings, retry_settings
from firefly_scheduling.tasks.validation import validate_descriptor

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def task_with(**arguments: Any) -> ScheduledDescriptor:
    namespace: dict[str, Any] = {"__name__": "app.tasks"}
    exec("def job():\n    pass\n", namespace)
    descriptor = descriptor_of(scheduled(**arguments)(namespace["job"]))
    assert descriptor is not None
    return descriptor


class TestTheArguments:
    def test_retries_with_default_backoffs(self) -> None:
        descriptor = task_with(fixed_rate="1h", retries=3)
        assert (descriptor.retries, descriptor.retry_backoff, descriptor.retry_backoff_max) == (
            3,
            None,
            None,
        )
        assert retry_settings(descriptor) == RetrySettings(3, 10.0, 600.0)

    def test_backoffs_are_durations(self) -> None:
        descriptor = task_with(
            cron="0 * * * *", retries=2, retry_backoff="1s", retry_backoff_max=timedelta(minutes=1)
        )
        assert retry_settings(descriptor) == RetrySettings(2, 1.0, 60.0)

    def test_no_retries_and_zero_retries_ask_for_none(self) -> None:
        assert retry_settings(task_with(fixed_rate="1h")) is None
        assert retry_settings(task_with(fixed_rate="1h", retries=0)) is None

    @pytest.mark.parametrize(
        ("arguments", "error", "message"),
        [
            ({"retries": True}, ConfigurationError, "app.tasks:job: retries=True is not a whole"),
            ({"retries": 2.0}, ConfigurationError, "app.tasks:job: retries=2.0 is not a whole"),
            ({"retries": "3"}, ConfigurationError, "app.tasks:job: retries='3' is not a whole"),
            ({"retries": -1}, ConfigurationError, "app.tasks:job: retries=-1 is out of range"),
            ({"retries": 101}, ConfigurationError, "app.tasks:job: retries=101 is out of range"),
            (
                {"retries": 2, "retry_backoff": "0s"},
                DurationError,
                "app.tasks:job retry_backoff: a duration must be greater than zero",
            ),
            (
                {"retries": 2, "retry_backoff_max": "-1s"},
                DurationError,
                "app.tasks:job retry_backoff_max",
            ),
            (
                {"retries": 2, "retry_backoff": "1m", "retry_backoff_max": "30s"},
                ConfigurationError,
                "app.tasks:job: retry_backoff=1m is longer than retry_backoff_max=30s",
            ),
            (
                {"retries": 2, "retry_backoff": "20m"},
                ConfigurationError,
                "retry_backoff=20m is longer than retry_backoff_max=10m (its default)",
            ),
            (
                {"retry_backoff": "5s"},
                ConfigurationError,
                "app.tasks:job: retry_backoff= given without retries=",
            ),
            (
                {"retry_backoff_max": "5m"},
                ConfigurationError,
                "app.tasks:job: retry_backoff_max= given without retries=",
            ),
        ],
    )
    def test_a_bad_value_is_refused_naming_the_task_and_the_value(
        self, arguments: dict[str, Any], error: type[Exception], message: str
    ) -> None:
        with pytest.raises(error) as raised:
            task_with(fixed_rate="1h", **arguments)
        assert message in str(raised.value)

    def test_a_descriptor_built_by_hand_is_checked_alike(self) -> None:
        with pytest.raises(ConfigurationError, match=r"pkg\.mod:f: retries=True"):
            validate_descriptor(
                ScheduledDescriptor(target="pkg.mod:f", fixed_rate=1.0, retries=True)
            )
        with pytest.raises(ConfigurationError, match="expected a number of seconds"):
            validate_descriptor(
                ScheduledDescriptor(
                    target="pkg.mod:f",
                    fixed_rate=1.0,
                    retries=1,
                    retry_backoff="1s",  # type: ignore[arg-type]  # the point of the test
                )
            )

    def test_the_manifest_carries_the_three_fields(self) -> None:
        descriptor = task_with(
            fixed_rate="1h", retries=4, retry_backoff="2s", retry_backoff_max="1m"
        )
        text = encode([descriptor], ["app"])
        [schedule] = json.loads(text)["schedules"]
        assert (schedule["retries"], schedule["retry_backoff"], schedule["retry_backoff_max"]) == (
            4,
            2.0,
            60.0,
        )
        _, [loaded] = decode(json.loads(text))
        assert loaded == descriptor

    def test_a_manifest_with_a_bad_count_is_refused(self) -> None:
        document = {
            "format": "firefly-scheduling-manifest",
            "version": 1,
            "packages": ["app"],
            "schedules": [{"fixed_rate": 60.0, "retries": -2}],
            "tasks": [["app.tasks:job", 0, True]],
        }
        with pytest.raises(ConfigurationError, match=r"app\.tasks:job: retries=-2 is out of range"):
            decode(document)


class TestTheBoot:
    @pytest.mark.parametrize(
        ("arguments", "message"),
        [
            ('fixed_rate="1h", retries=-1', "retryapp:bad: retries=-1 is out of range"),
            ('fixed_rate="1h", retries=True', "retryapp:bad: retries=True is not a whole"),
            (
                'fixed_rate="1h", retries=2, retry_backoff="2m", retry_backoff_max="1m"',
                "retryapp:bad: retry_backoff=2m is longer than retry_backoff_max=1m",
            ),
            ('fixed_rate="1h", retry_backoff="5s"', "retryapp:bad: retry_backoff= given without"),
        ],
    )
    def test_a_bad_value_stops_the_boot_with_exit_2(
        self, isolated: Path, arguments: str, message: str
    ) -> None:
        (isolated / "retryapp").mkdir()
        (isolated / "retryapp" / "__init__.py").write_text(
            f"from firefly_scheduling import scheduled\n\n@scheduled({arguments})\ndef bad():\n"
            "    pass\n"
        )
        result = CliRunner().invoke(
            main, ["schedule", "--path", ".", "--app", "retryapp"], env={"COLUMNS": "200"}
        )
        assert result.exit_code == 2, result.output
        assert message in " ".join(result.output.split())

    def test_schedule_json_lists_the_three_fields(self, isolated: Path) -> None:
        (isolated / "retryjson").mkdir()
        (isolated / "retryjson" / "__init__.py").write_text(
            "from firefly_scheduling import scheduled\n\n"
            '@scheduled(fixed_rate="1h", retries=3)\ndef defaults():\n    pass\n\n'
            '@scheduled(fixed_rate="1h", retries=1, retry_backoff="1s", retry_backoff_max="5s")\n'
            "def given():\n    pass\n\n"
            '@scheduled(fixed_rate="1h")\ndef plain():\n    pass\n'
        )
        listed = CliRunner().invoke(
            main, ["schedule", "--path", ".", "--app", "retryjson", "--json"]
        )
        assert listed.exit_code == 0, listed.output
        rows = {row["target"]: row for row in map(json.loads, listed.output.splitlines())}
        fields = ("retries", "retry_backoff", "retry_backoff_max")
        assert {target: tuple(row[name] for name in fields) for target, row in rows.items()} == {
            "retryjson:defaults": (3, 10.0, 600.0),
            "retryjson:given": (1, 1.0, 5.0),
            "retryjson:plain": (None, None, None),
        }


class TestTheBackoff:
    def test_the_cap_doubles_from_the_backoff_up_to_its_maximum(self) -> None:
        caps = [backoff_cap(k, 10.0, 600.0) for k in range(1, 10)]
        assert caps == [10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 600.0, 600.0, 600.0]
        assert backoff_cap(10_000, 10.0, 600.0) == 600.0  # no overflow for a large k
        with pytest.raises(ValueError, match="numbered from 1"):
            backoff_cap(0, 10.0, 600.0)

    def test_every_delay_is_within_zero_and_its_cap(self) -> None:
        for minute in range(200):
            instant = T0 + timedelta(minutes=minute)
            for k in range(1, 9):
                delay = retry_delay("app.tasks:job", instant, k, backoff=10.0, backoff_max=600.0)
                assert timedelta(0) <= delay < timedelta(seconds=backoff_cap(k, 10.0, 600.0))

    def test_the_draw_spreads_over_its_range(self) -> None:
        """Full jitter: uniform in [0, cap). 2000 draws of a 10 s cap fill each tenth."""
        draws = [
            retry_delay("app.tasks:job", T0 + timedelta(seconds=n), 1, backoff=10, backoff_max=600)
            for n in range(2000)
        ]
        tenths = {int(delay.total_seconds()) for delay in draws}
        assert tenths == set(range(10))
        mean = sum(delay.total_seconds() for delay in draws) / len(draws)
        assert 4.5 < mean < 5.5

    def test_it_depends_on_the_task_the_instant_and_the_retry(self) -> None:
        delays = {
            retry_delay(target, instant, k, backoff=600.0, backoff_max=600.0)
            for target in ("app.tasks:a", "app.tasks:b")
            for instant in (T0, T0 + timedelta(hours=1))
            for k in (1, 2)
        }
        assert len(delays) == 8

    def test_every_node_draws_the_same_whatever_its_zone_and_hash_seed(
        self, tmp_path: Path
    ) -> None:
        """Two processes with other time zones and hash seeds compute the same delays."""
        program = textwrap.dedent(
            """
            import json
            from datetime import UTC, datetime, timedelta
            from firefly_scheduling.schedule.retry_backoff import retry_delay
            t0 = datetime(2030, 1, 1, tzinfo=UTC)
            print(json.dumps([
                retry_delay("app.tasks:job", t0 + timedelta(minutes=m), k,
                            backoff=10.0, backoff_max=600.0).total_seconds()
                for m in range(20) for k in range(1, 5)
            ]))
            """
        )
        outputs = []
        for zone, seed in (("Asia/Kathmandu", "1"), ("America/St_Johns", "2")):
            env = {**os.environ, "TZ": zone, "PYTHONHASHSEED": seed}
            done = subprocess.run(
                [sys.executable, "-c", program],
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
                check=True,
            )
            outputs.append(json.loads(done.stdout))
        here = [
            retry_delay(
                "app.tasks:job", T0 + timedelta(minutes=m), k, backoff=10.0, backoff_max=600.0
            ).total_seconds()
            for m in range(20)
            for k in range(1, 5)
        ]
        assert outputs == [here, here]
