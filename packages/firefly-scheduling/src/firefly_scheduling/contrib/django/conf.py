"""`FIREFLY_SCHEDULING` in Django's settings, read as the environment would be.

Every key is a firefly-scheduling environment variable without its
`FIREFLY_SCHEDULING_` prefix: `LOCK_PROVIDER`, `LOCK_REQUIRED`, `LOCK_<NAME>_URL`,
`HISTORY_URL`, `NODE`, `FIRES_GRACE`, ... (the table `settings.KNOWN_KEYS`, which
docs/configuration.md lists), plus `TASK_MODULES` to replace the default task
discovery. Django's values win over the process environment, so one deployment can
keep secrets in the environment and the rest in settings. Values are strings,
booleans or numbers; anything else, and any unknown key, is `ImproperlyConfigured`
naming the key (and the nearest known one), when Django starts.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Mapping

from django.apps import apps
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.settings import KNOWN_KEYS, Settings, env_var
from firefly_scheduling.suggestions import did_you_mean

SETTING = "FIREFLY_SCHEDULING"
PREFIX = "FIREFLY_SCHEDULING_"
#: Django's own key: the modules holding tasks, instead of every app's `tasks`.
TASK_MODULES = "TASK_MODULES"
#: The keys `FIREFLY_SCHEDULING` accepts: the environment variables of the settings
#: table that carry the prefix (dropped), and `TASK_MODULES`.
ACCEPTED_KEYS: tuple[str, ...] = (
    *(env_var(key).removeprefix(PREFIX) for key in KNOWN_KEYS if env_var(key).startswith(PREFIX)),
    TASK_MODULES,
)
#: `LOCK_<PROVIDER>_URL`, for any provider name.
_LOCK_URL_KEY = re.compile(r"LOCK_[A-Z0-9_]+_URL")
#: Which modules of each installed app hold tasks.
TASKS_MODULE = "tasks"


def django_environment() -> dict[str, str]:
    """`FIREFLY_SCHEDULING` as environment variables; ImproperlyConfigured when malformed."""
    configured = getattr(django_settings, SETTING, {})
    if not isinstance(configured, Mapping):
        raise ImproperlyConfigured(
            f"settings.{SETTING} must be a dict, got {type(configured).__name__}"
        )
    environment: dict[str, str] = {}
    for key, value in configured.items():
        if not isinstance(key, str) or not (key in ACCEPTED_KEYS or _LOCK_URL_KEY.fullmatch(key)):
            guess = (did_you_mean(key, ACCEPTED_KEYS) if isinstance(key, str) else "") or "."
            raise ImproperlyConfigured(
                f"settings.{SETTING} has an unknown key {key!r}{guess} Known keys: "
                f"{', '.join(ACCEPTED_KEYS)} and LOCK_<PROVIDER>_URL"
            )
        environment[PREFIX + key] = _text(key, value)
    return environment


def process_environment() -> dict[str, str]:
    """`FIREFLY_SCHEDULING` as the variables a firefly command reads (not `TASK_MODULES`)."""
    environment = django_environment()
    environment.pop(PREFIX + TASK_MODULES, None)
    return environment


def firefly_settings() -> Settings:
    """The `Settings` of this Django process: the environment, then `FIREFLY_SCHEDULING`."""
    merged = {**os.environ, **process_environment()}
    try:
        return Settings.from_env(merged)
    except ConfigurationError as err:
        raise ImproperlyConfigured(f"settings.{SETTING}: {err}") from err


def task_modules() -> list[str]:
    """`TASK_MODULES` if set, else the `tasks` module of every installed app that has one."""
    explicit = django_environment().get(PREFIX + TASK_MODULES)
    if explicit is not None:
        return [name.strip() for name in explicit.split(",") if name.strip()]
    found = []
    for app in apps.get_app_configs():
        name = f"{app.name}.{TASKS_MODULE}"
        if importlib.util.find_spec(name) is not None:
            found.append(name)
    return found


def _text(key: str, value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    if key == TASK_MODULES and isinstance(value, list | tuple):
        return ",".join(str(item) for item in value)
    raise ImproperlyConfigured(
        f"settings.{SETTING}[{key!r}] must be a string, a boolean or a number, "
        f"got {type(value).__name__}"
    )
