"""`Settings`: every configuration key of DESIGN.md §3, from the environment or explicit.

A dotted key maps to an environment variable by upper-casing it and turning `.`
and `-` into `_`: `firefly.scheduling.lock.provider` is read from
`FIREFLY_SCHEDULING_LOCK_PROVIDER`.

Core knows its own keys. A provider's URL is generic: `firefly.scheduling.lock.<name>.url`
for any provider name, with the fallbacks and default the provider's descriptor
declares (`url_for`), so a new backend needs no field here.
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
from firefly_scheduling.providers.descriptor import LockProvider
from firefly_scheduling.urls.redaction import redact_url

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
    #: `firefly.scheduling.lock.<name>.url` values, by provider name (`-` read as `_`).
    lock_urls: Mapping[str, str] = field(default_factory=dict)
    initial_delay_enabled: bool = True
    initial_delay_store: str = ""
    initial_delay_release: str = ""
    scan_packages: tuple[str, ...] = ()
    manifest_path: Path = field(default_factory=lambda: Path(DEFAULT_MANIFEST))
    history_url: str = ""
    grace: float = DEFAULT_GRACE_SECONDS
    clock_skew: float = DEFAULT_CLOCK_SKEW_SECONDS
    node: str = field(default_factory=default_node_name)
    #: The environment the providers' URL fallbacks (`DATABASE_URL`, ...) are read
    #: from; empty for settings built by hand, which then name every URL they use.
    fallback_env: Mapping[str, str] = field(default_factory=dict, compare=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read every key from `env` (default: `os.environ`), applying the documented fallbacks."""
        env = os.environ if env is None else env

        def get(key: str) -> str | None:
            value = env.get(env_var(key))
            return None if value is None or value.strip() == "" else value.strip()

        return cls(
            lock_provider=(get("firefly.scheduling.lock.provider") or "none").lower(),
            lock_required=_parse_bool(env, "firefly.scheduling.lock.required", default=False),
            lock_urls=_lock_urls(env),
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
            fallback_env=dict(env),
        )

    def url_for(self, provider: LockProvider | str) -> str:
        """The URL of `provider`: its key, else its fallbacks in order, else its default.

        A `ConfigurationError` naming the key and the fallbacks when none is set and
        the provider has no default. A name is looked up among the installed
        providers for its fallbacks; an unknown name has its key alone.
        """
        descriptor = _descriptor(provider)
        name = descriptor.name if isinstance(descriptor, LockProvider) else descriptor
        url = self.lock_urls.get(_url_name(name), "")
        fallbacks = descriptor.url_fallbacks if isinstance(descriptor, LockProvider) else ()
        for variable in fallbacks:
            url = url or (self.fallback_env.get(variable) or "").strip()
        if not url and isinstance(descriptor, LockProvider):
            url = descriptor.default_url or ""
        if not url:
            key = f"firefly.scheduling.lock.{name}.url"
            also = "".join(f" or {variable}" for variable in fallbacks)
            raise ConfigurationError(
                f"the {name!r} lock provider needs a URL: set {env_var(key)} ({key}){also}"
            )
        return url

    def __repr__(self) -> str:
        def shown(url: str | None) -> str | None:
            return None if url is None else redact_url(url)

        return (
            f"Settings(lock_provider={self.lock_provider!r}, "
            f"lock_required={self.lock_required!r}, "
            f"lock_urls={ {name: shown(url) for name, url in self.lock_urls.items()}!r}, "
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


_LOCK_URL_VARIABLE = re.compile(r"FIREFLY_SCHEDULING_LOCK_([A-Z0-9_]+)_URL")


def _url_name(provider: str) -> str:
    """How a provider name appears in its URL variable, lower-cased: `-` and `.` as `_`."""
    return env_var(provider).lower()


def _lock_urls(env: Mapping[str, str]) -> dict[str, str]:
    """Every `FIREFLY_SCHEDULING_LOCK_<NAME>_URL` that is set, by lower-case name."""
    found: dict[str, str] = {}
    for variable, value in env.items():
        match = _LOCK_URL_VARIABLE.fullmatch(variable)
        if match and value.strip():
            found[match.group(1).lower()] = value.strip()
    return found


def _descriptor(provider: LockProvider | str) -> LockProvider | str:
    """`provider` itself, or the installed descriptor of that name, or the bare name."""
    if isinstance(provider, LockProvider):
        return provider
    # Imported here: the registry reads entry points, which only a name lookup needs.
    from firefly_scheduling.providers.registry import registered_providers  # noqa: PLC0415

    name = provider.strip().lower()
    if name not in registered_providers():
        return name
    from firefly_scheduling.providers.registry import load_provider  # noqa: PLC0415

    return load_provider(name, source=f"a URL lookup for {name!r}")
