"""`Settings`: every configuration key of DESIGN.md §3, from the environment or explicit.

A dotted key maps to an environment variable by upper-casing it and turning `.`
and `-` into `_`: `firefly.scheduling.lock.provider` is read from
`FIREFLY_SCHEDULING_LOCK_PROVIDER`.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from firefly_scheduling.durations import parse_duration
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.locks.redaction import redact_url

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_MEMCACHED_URL = "memcached://127.0.0.1:11211"
DEFAULT_MANIFEST = ".firefly/scheduled.json"
#: How late a fire may still be claimed (and a died run adopted); see docs/guarantees.md.
DEFAULT_GRACE_SECONDS = 60.0
#: The largest clock difference between two nodes that fire claims tolerate.
DEFAULT_CLOCK_SKEW_SECONDS = 5.0

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def env_var(key: str) -> str:
    """The environment variable that holds the dotted configuration `key`."""
    return key.upper().replace(".", "_").replace("-", "_")


def default_node_name() -> str:
    """`<hostname>-<pid>`: distinct for every process of a fleet, readable in the run history."""
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True)
class Settings:
    """Resolved configuration. Build it with `Settings.from_env()` or pass fields directly."""

    lock_provider: str = "none"
    #: Refuse to boot locked tasks on a lock that excludes nothing across processes.
    lock_required: bool = False
    postgres_url: str | None = None
    database_url: str | None = None
    mysql_url: str | None = None
    redis_url: str = DEFAULT_REDIS_URL
    memcached_url: str = DEFAULT_MEMCACHED_URL
    initial_delay_enabled: bool = True
    initial_delay_store: str = ""
    initial_delay_release: str = ""
    scan_packages: tuple[str, ...] = ()
    manifest_path: Path = field(default_factory=lambda: Path(DEFAULT_MANIFEST))
    history_url: str = ""
    grace: float = DEFAULT_GRACE_SECONDS
    clock_skew: float = DEFAULT_CLOCK_SKEW_SECONDS
    node: str = field(default_factory=default_node_name)
    #: `FIREFLY_SCHEDULING_LOCK_<NAME>_URL` of providers without a field above
    #: (third-party ones), by lower-case provider name.
    other_lock_urls: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read every key from `env` (default: `os.environ`), applying the documented fallbacks."""
        env = os.environ if env is None else env

        def get(key: str) -> str | None:
            value = env.get(env_var(key))
            return None if value is None or value.strip() == "" else value.strip()

        database_url = env.get("DATABASE_URL") or None
        return cls(
            lock_provider=(get("firefly.scheduling.lock.provider") or "none").lower(),
            lock_required=_parse_bool(env, "firefly.scheduling.lock.required", default=False),
            postgres_url=get("firefly.scheduling.lock.postgres.url") or database_url,
            database_url=get("firefly.scheduling.lock.database.url") or database_url,
            mysql_url=get("firefly.scheduling.lock.mysql.url") or database_url,
            redis_url=get("firefly.scheduling.lock.redis.url")
            or env.get("REDIS_URL")
            or DEFAULT_REDIS_URL,
            memcached_url=get("firefly.scheduling.lock.memcached.url") or DEFAULT_MEMCACHED_URL,
            initial_delay_enabled=_parse_bool(
                env, "firefly.scheduling.initial-delay.enabled", default=True
            ),
            initial_delay_store=get("firefly.scheduling.initial-delay.store") or "",
            initial_delay_release=get("firefly.scheduling.initial-delay.release") or "",
            scan_packages=_parse_list(get("firefly.scan.packages") or ""),
            manifest_path=Path(get("firefly.scheduling.manifest") or DEFAULT_MANIFEST),
            history_url=get("firefly.scheduling.history.url") or "",
            grace=_parse_seconds(env, "firefly.scheduling.fires.grace", DEFAULT_GRACE_SECONDS),
            clock_skew=_parse_seconds(
                env, "firefly.scheduling.fires.clock-skew", DEFAULT_CLOCK_SKEW_SECONDS
            ),
            node=get("firefly.scheduling.node") or default_node_name(),
            other_lock_urls=_other_lock_urls(env),
        )

    def url_for(self, provider: str) -> str:
        """The URL configured for `provider`, or a `ConfigurationError` naming the key."""
        url = {
            "postgres": self.postgres_url,
            "database": self.database_url,
            "mysql": self.mysql_url,
            "redis": self.redis_url,
            "memcached": self.memcached_url,
        }.get(provider, self.other_lock_urls.get(provider))
        if not url:
            key = f"firefly.scheduling.lock.{provider}.url"
            raise ConfigurationError(
                f"the {provider!r} lock provider needs a URL: set {env_var(key)} "
                f"({key}) or DATABASE_URL"
            )
        return url

    def __repr__(self) -> str:
        def shown(url: str | None) -> str | None:
            return None if url is None else redact_url(url)

        return (
            f"Settings(lock_provider={self.lock_provider!r}, "
            f"lock_required={self.lock_required!r}, "
            f"postgres_url={shown(self.postgres_url)!r}, "
            f"database_url={shown(self.database_url)!r}, "
            f"mysql_url={shown(self.mysql_url)!r}, redis_url={shown(self.redis_url)!r}, "
            f"memcached_url={shown(self.memcached_url)!r}, "
            f"initial_delay_enabled={self.initial_delay_enabled!r}, "
            f"initial_delay_store={shown(self.initial_delay_store)!r}, "
            f"initial_delay_release={self.initial_delay_release!r}, "
            f"scan_packages={self.scan_packages!r}, manifest_path={str(self.manifest_path)!r}, "
            f"history_url={shown(self.history_url)!r}, grace={self.grace!r}, "
            f"clock_skew={self.clock_skew!r}, node={self.node!r})"
        )


def _parse_bool(env: Mapping[str, str], key: str, *, default: bool) -> bool:
    raw = env.get(env_var(key))
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigurationError(f"{env_var(key)} ({key}) must be true or false, got {raw!r}")


def _parse_seconds(env: Mapping[str, str], key: str, default: float) -> float:
    raw = env.get(env_var(key))
    if raw is None or raw.strip() == "":
        return default
    return parse_duration(raw, source=f"{env_var(key)} ({key})")


def _parse_list(raw: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in raw.split(",") if item.strip())


_FIRST_PARTY_URL_PROVIDERS = frozenset({"postgres", "database", "mysql", "redis", "memcached"})
_LOCK_URL_VARIABLE = re.compile(r"FIREFLY_SCHEDULING_LOCK_([A-Z0-9_]+)_URL")


def _other_lock_urls(env: Mapping[str, str]) -> dict[str, str]:
    """`FIREFLY_SCHEDULING_LOCK_<NAME>_URL` values for providers core has no field for."""
    found: dict[str, str] = {}
    for variable, value in env.items():
        match = _LOCK_URL_VARIABLE.fullmatch(variable)
        if match and value.strip():
            provider = match.group(1).lower()
            if provider not in _FIRST_PARTY_URL_PROVIDERS:
                found[provider] = value.strip()
    return found
