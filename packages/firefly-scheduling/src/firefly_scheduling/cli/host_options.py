"""What `run` and `tick` share: their options, logging, and the boot of their tasks.

Both hosts take the same task source, provider, node, fire log, grace period and
logging options, and boot the same way; this module holds that once (the commands
themselves only differ in the host they build).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from firefly_scheduling.cli.common import discover_tasks, settings_for, task_source_options
from firefly_scheduling.control.selection import control_store_url
from firefly_scheduling.control.store import ControlStore
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.history.selection import history_factory
from firefly_scheduling.hosts.observation.fire_log import FireLog
from firefly_scheduling.hosts.observation.observers import FireObserver
from firefly_scheduling.hosts.runtime.boot import build_runtime, validated
from firefly_scheduling.hosts.runtime.shutdown import DEFAULT_GRACE_PERIOD_SECONDS
from firefly_scheduling.hosts.runtime.steering_store import steering_store
from firefly_scheduling.hosts.runtime.task_runtime import TaskRuntime
from firefly_scheduling.settings import Settings, configured_node
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.discovery import runtime_targets

LOG_FORMATS = ("text", "json")

logger = logging.getLogger("firefly_scheduling.hosts")


@dataclass(frozen=True)
class HostOptions:
    """The options `run` and `tick` share, as one value."""

    apps: tuple[str, ...]
    manifest: Path | None
    paths: tuple[Path, ...]
    lock_provider: str | None
    node: str | None
    fire_log: Path | None
    grace_period: float
    max_workers: int | None
    wait_for_backend: float | None
    log_level: str
    log_format: str

    def boot(
        self, host: str
    ) -> tuple[TaskRuntime, tuple[ScheduledDescriptor, ...], ControlStore | None]:
        """Logging, settings, validated tasks, the runtime of the `host` command and
        the control store it steers from (None, said once, where none is configured)."""
        # Logging first: reading the settings may already warn (an unknown variable).
        node = self.node or configured_node(os.environ)
        configure_logging(self.log_level, node, self.log_format)
        settings, descriptors = prepare_host(
            self.apps, self.manifest, self.paths, self.lock_provider, self.node
        )
        # The history's URL is checked first: a URL no store takes (a key=value string)
        # is refused there, with its way out (`FIREFLY_SCHEDULING_HISTORY_URL=off`).
        history_factory(settings)
        # One control store client per host: the fire runner reads the pauses from the
        # store the host steers from.
        control = steering_store(settings)
        try:
            runtime = build_runtime(
                descriptors,
                settings,
                host=host,
                observers=observers_for(self.fire_log),
                wait_for_backend_seconds=self.wait_for_backend,
                control=control,
            )
        except BaseException:
            if control is not None:
                control.close()
            raise
        return runtime, descriptors, control

    def runtime_targets(self) -> frozenset[str]:
        """The callables of the host's task source that runtime schedules may run
        (`tasks.discovery.runtime_targets`); they are read from the boot's control store."""
        settings = host_settings(self.manifest, self.lock_provider, self.node)
        return runtime_targets(settings, packages=list(self.apps) or None)


_HOST_OPTION_NAMES = tuple(field.name for field in fields(HostOptions))


def host_options(*, worker_ceiling: int) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """The options `run` and `tick` share: task source, lock provider, node, grace, logging.

    The command receives them as one `HostOptions`, its first argument, followed by
    its own options as keywords. `worker_ceiling` is the host's default bound on its
    threads, which `--max-workers` states.
    """

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        return _with_host_options(command, worker_ceiling)

    return decorate


def _with_host_options(command: Callable[..., None], worker_ceiling: int) -> Callable[..., None]:
    @functools.wraps(command)
    def with_host_options(**given: Any) -> None:
        shared = {name: given.pop(name) for name in _HOST_OPTION_NAMES}
        command(HostOptions(**shared), **given)

    options = (
        click.option(
            "--lock-provider",
            default=None,
            metavar="NAME",
            help="Lock provider for this process, overriding FIREFLY_SCHEDULING_LOCK_PROVIDER.",
        ),
        click.option(
            "--node",
            default=None,
            metavar="NAME",
            help="This node's name in logs and records, overriding FIREFLY_SCHEDULING_NODE "
            "[default: hostname-pid].",
        ),
        click.option(
            "--fire-log",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="Append one JSON line per fire handled here to this file (debugging, demo).",
        ),
        click.option(
            "--grace-period",
            type=click.FloatRange(min=0),
            default=DEFAULT_GRACE_PERIOD_SECONDS,
            show_default=True,
            help="Seconds running bodies get to finish after SIGTERM/SIGINT.",
        ),
        click.option(
            "--max-workers",
            type=click.IntRange(min=1),
            default=None,
            metavar="N",
            help="Threads that run task bodies on this node [default: one per task, at most "
            f"{worker_ceiling}]. Fewer threads cost less CPU per fire on a busy node "
            "(docs/scaling.md).",
        ),
        click.option(
            "--wait-for-backend",
            type=click.FloatRange(min=0),
            default=None,
            metavar="SECONDS",
            help="How long to retry a lock backend that does not answer at boot before "
            "exiting 3, overriding FIREFLY_SCHEDULING_WAIT_FOR_BACKEND [default: 30; 0 "
            "tries once].",
        ),
        click.option(
            "--log-level",
            type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
            default="INFO",
            show_default=True,
        ),
        click.option(
            "--log-format",
            type=click.Choice(LOG_FORMATS, case_sensitive=False),
            default="text",
            show_default=True,
            help="`json`: one JSON object per log line (time, level, node, logger, message).",
        ),
    )
    decorated: Callable[..., None] = with_host_options
    for option in reversed(options):
        decorated = option(decorated)
    return task_source_options(decorated)


class JsonLogFormatter(logging.Formatter):
    """One JSON object per record, for log shippers that parse structured lines.

    Keys: `time` (ISO 8601, UTC), `level`, `node`, `logger`, `message`, and `error`
    (the formatted traceback) when the record carries one.
    """

    def __init__(self, node: str) -> None:
        super().__init__()
        self.node = node

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "node": self.node,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(level: str, node: str, log_format: str = "text") -> None:
    """Log lines to stderr, each naming the node, as text or JSON.

    APScheduler's own INFO lines (every job added, run and removed) are left out
    unless `--log-level DEBUG`; its warnings (a fire skipped because the previous
    run of the task is still going) stay.
    """
    handler = logging.StreamHandler(sys.stderr)
    if log_format.lower() == "json":
        handler.setFormatter(JsonLogFormatter(node))
    else:
        handler.setFormatter(
            logging.Formatter(f"%(asctime)s %(levelname)s [{node}] %(name)s: %(message)s")
        )
    logging.basicConfig(level=level.upper(), handlers=[handler])
    if level.upper() != "DEBUG":
        logging.getLogger("apscheduler").setLevel(logging.WARNING)


def prepare_host(
    apps: tuple[str, ...],
    manifest: Path | None,
    paths: tuple[Path, ...],
    lock_provider: str | None,
    node: str | None,
) -> tuple[Settings, tuple[ScheduledDescriptor, ...]]:
    """Settings with the overrides applied, and the validated tasks (none is an error)."""
    settings = host_settings(manifest, lock_provider, node)
    discovered = discover_tasks(apps, manifest, paths, settings)
    if not discovered.descriptors:
        _refuse_unless_runtime_only(discovered.explanation, settings, apps)
    return settings, validated(discovered.descriptors)


def _refuse_unless_runtime_only(
    explanation: str, settings: Settings, apps: tuple[str, ...]
) -> None:
    """A node without a `@scheduled` task boots only to run runtime schedules: when the
    code has `@schedulable` callables and a durable control store keeps the schedules.
    Otherwise it is refused with `explanation` (and why the callables cannot run)."""
    if not runtime_targets(settings, packages=list(apps) or None):
        raise ConfigurationError(explanation)
    try:
        control_store_url(settings)
    except ConfigurationError as err:
        raise ConfigurationError(
            f"{explanation}; the @schedulable callables found run only on runtime "
            f"schedules, and {err}"
        ) from err
    logger.info("no @scheduled task: this node runs the runtime schedules only")


def host_settings(manifest: Path | None, lock_provider: str | None, node: str | None) -> Settings:
    """The environment's settings with the host's `--manifest`, provider and node applied."""
    settings = settings_for(manifest)
    if lock_provider:
        settings = replace(settings, lock_provider=lock_provider.strip().lower())
    if node:
        settings = replace(settings, node=node)
    return settings


def observers_for(fire_log: Path | None) -> tuple[FireObserver, ...]:
    return () if fire_log is None else (FireLog(fire_log),)
