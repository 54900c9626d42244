"""`FIREFLY_SCHEDULING` in Django's settings, read as the environment would be.

Every key is a firefly-scheduling environment variable without its
`FIREFLY_SCHEDULING_` prefix: `LOCK_PROVIDER`, `LOCK_REQUIRED`, `LOCK_<NAME>_URL`,
`HISTORY_URL`, `NODE`, `FIRES_GRACE`, ... (docs/configuration.md lists them), plus
`SCAN_PACKAGES`/`TASK_MODULES` to replace the default task discovery. Django's
values win over the process environment, so one deployment can keep secrets in the
environment and the rest in settings. Values are strings, booleans or numbers;
anything else, and any unknown key, is `ImproperlyConfigured` naming the key, when
Django starts.
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
from firefly_scheduling.settings import Settings

SETTING = "FIREFLY_SCHEDULING"
PREFIX = "FIREFLY_SCHEDULING_"
#: The keys `FIREFLY_SCHEDULING` accepts (the environment variables, prefix dropped).
KNOWN_KEYS = re.compile(
    r"LOCK_PROVIDER|LOCK_REQUIRED|LOCK_[A-Z0-9_]+_URL|INITIAL_DELAY_(ENABLED|STORE|RELEASE)"
    r"|MANIFEST|HISTORY_URL|FIRES_GRACE|FIRES_CLOCK_SKEW|NODE|TASK_MODULES"
)
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
        if not isinstance(key, str) or not KNOWN_KEYS.fullmatch(key):
            raise ImproperlyConfigured(
                f"settings.{SETTING} has an unknown key {key!r}; known keys: LOCK_PROVIDER, "
                "LOCK_REQUIRED, LOCK_<PROVIDER>_URL, HISTORY_URL, NODE, FIRES_GRACE, "
                "FIRES_CLOCK_SKEW, INITIAL_DELAY_ENABLED, INITIAL_DELAY_STORE, "
                "INITIAL_DELAY_RELEASE, MANIFEST, TASK_MODULES"
            )
        environment[PREFIX + key] = _text(key, value)
    return environment


def firefly_settings() -> Settings:
    """The `Settings` of this Django process: the environment, then `FIREFLY_SCHEDULING`."""
    merged = {**os.environ, **django_environment()}
    try:
        return Settings.from_env(merged)
    except ConfigurationError as err:
        raise ImproperlyConfigured(f"settings.{SETTING}: {err}") from err


def task_modules() -> list[str]:
    """`TASK_MODULES` if set, else the `tasks` module of every installed app that has one."""
    explicit = django_environment().get(PREFIX + "TASK_MODULES")
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
    if key == "TASK_MODULES" and isinstance(value, list | tuple):
        return ",".join(str(item) for item in value)
    raise ImproperlyConfigured(
        f"settings.{SETTING}[{key!r}] must be a string, a boolean or a number, "
        f"got {type(value).__name__}"
    )
