"""`Settings`: every configuration key (docs/configuration.md), from the environment or explicit.

A dotted key maps to an environment variable by upper-casing it and turning `.`
and `-` into `_`: `firefly.scheduling.lock.provider` is read from
`FIREFLY_SCHEDULING_LOCK_PROVIDER`.

Core knows its own keys, listed once in `KNOWN_KEYS`. A provider's URL is generic:
`firefly.scheduling.lock.<name>.url` for any provider name, with the fallbacks and
default the provider's descriptor declares (`url_for`), so a new backend needs no
field here.

Any other `FIREFLY_*` variable is a mistake until shown otherwise (a misspelt
`FIREFLY_SCHEDULING_LOCK_REDIS_ULR` would leave the default server in use unnoticed):
`from_env` logs a WARNING naming it and the nearest known variable, and refuses it
under `FIREFLY_SCHEDULING_STRICT=true`. The prefixes in `RESERVED_PREFIXES` belong to
the test suites and benchmarks and are never checked.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.providers.descriptor import LockProvider
from firefly_scheduling.schedule.durations import parse_duration
from firefly_scheduling.suggestions import nearest
from firefly_scheduling.urls.redaction import redact_url

logger = logging.getLogger("firefly_scheduling.settings")

DEFAULT_MANIFEST = ".firefly/scheduled.json"
#: How late a fire may still be claimed (and a died run adopted); see docs/guarantees.md.
DEFAULT_GRACE_SECONDS = 60.0
#: The largest clock difference between two nodes that fire claims tolerate.
DEFAULT_CLOCK_SKEW_SECONDS = 5.0
#: How long a host retries a lock backend that does not answer at boot.
DEFAULT_WAIT_FOR_BACKEND_SECONDS = 30.0

#: Every key core reads from the environment (the variable is `env_var(key)`), besides
#: the providers' URL keys `firefly.scheduling.lock.<name>.url`. docs/configuration.md
#: documents each one; a test holds the two together.
KNOWN_KEYS: tuple[str, ...] = (
    "firefly.scheduling.lock.provider",
    "firefly.scheduling.lock.required",
    "firefly.scheduling.initial-delay.enabled",
    "firefly.scheduling.initial-delay.store",
    "firefly.scheduling.initial-delay.release",
    "firefly.scan.packages",
    "firefly.scheduling.manifest",
    "firefly.scheduling.history.url",
    "firefly.scheduling.fires.grace",
    "firefly.scheduling.fires.clock-skew",
    "firefly.scheduling.node",
    "firefly.scheduling.wait-for-backend",
    "firefly.scheduling.strict",
    "firefly.scheduling.control.url",
)
#: Variables of the test suites and benchmarks, never read by a host, never checked:
#: `FIREFLY_TEST_` is the shipped contract plugin's (`FIREFLY_TEST_<BACKEND>_URL`,
#: `FIREFLY_TEST_REQUIRE_SERVERS`, a third-party backend's own URL included); the
#: others are the repository's benchmarks and host-process tests.
RESERVED_PREFIXES: tuple[str, ...] = (
    "FIREFLY_TEST_",
    "FIREFLY_BENCH_",
    "FIREFLY_CHAOS_",
    "FIREFLY_STRESS_",
    "FIREFLY_HOSTAPP_",
    "FIREFLY_DJANGO_TEST_",
)
STRICT_KEY = "firefly.scheduling.strict"
CONTROL_URL_KEY = "firefly.scheduling.control.url"
_FAMILY = "FIREFLY_"

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
    #: Seconds `run`, `tick` and the asyncio host retry a lock backend that does not
    #: answer at boot before they refuse to start; 0 tries once.
    wait_for_backend: float = DEFAULT_WAIT_FOR_BACKEND_SECONDS
    #: Refuse what is otherwise a warning: an unknown `FIREFLY_*` variable, a manifest
    #: that may be stale.
    strict: bool = False
    #: Where the control store lives (pauses, triggers, backfills, runtime schedules):
    #: '' means the lock backend's own durable store (`control.selection`).
    control_url: str = ""
    #: The environment the providers' URL fallbacks (`DATABASE_URL`, ...) are read
    #: from; empty for settings built by hand, which then name every URL they use.
    fallback_env: Mapping[str, str] = field(default_factory=dict, compare=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read every key from `env` (default: `os.environ`), applying the documented fallbacks.

        An unknown `FIREFLY_*` variable is logged as a WARNING naming the nearest known
        one, or refused with a `ConfigurationError` when `firefly.scheduling.strict` is
        set (see the module doc).
        """
        env = os.environ if env is None else env
        strict = _parse_bool(env, STRICT_KEY, default=False)
        _check_variables(env, strict=strict)

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
            node=configured_node(env),
            wait_for_backend=_parse_wait(env),
            strict=strict,
            control_url=_parse_store_url(env, CONTROL_URL_KEY),
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

    def url_source(self, provider: LockProvider | str) -> str:
        """Where `url_for(provider)` found its URL, for messages: a variable, or the default.

        `FIREFLY_SCHEDULING_LOCK_<NAME>_URL`, a fallback such as `DATABASE_URL`, or
        "the '<name>' provider's default", so an error about the URL says which
        setting to correct.
        """
        descriptor = _descriptor(provider)
        name = descriptor.name if isinstance(descriptor, LockProvider) else descriptor
        if self.lock_urls.get(_url_name(name), ""):
            return env_var(f"firefly.scheduling.lock.{name}.url")
        fallbacks = descriptor.url_fallbacks if isinstance(descriptor, LockProvider) else ()
        for variable in fallbacks:
            if (self.fallback_env.get(variable) or "").strip():
                return variable
        return f"the {name!r} provider's default"

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
            f"clock_skew={self.clock_skew!r}, node={self.node!r}, "
            f"wait_for_backend={self.wait_for_backend!r}, strict={self.strict!r}, "
            f"control_url={shown(self.control_url)!r})"
        )


def configured_node(env: Mapping[str, str]) -> str:
    """`firefly.scheduling.node` of `env`, else `<hostname>-<pid>`.

    For a host that names its log lines before it reads the rest of its settings.
    """
    value = (env.get(env_var("firefly.scheduling.node")) or "").strip()
    return value or default_node_name()


@dataclass(frozen=True)
class UnknownVariable:
    """A `FIREFLY_*` variable no part of firefly-scheduling reads, and what it may mean."""

    name: str
    #: The known variable it most resembles, or None.
    suggestion: str | None

    def __str__(self) -> str:
        guess = f"; did you mean {self.suggestion}?" if self.suggestion else ""
        return (
            f"{self.name} is not a firefly-scheduling setting and is ignored{guess} "
            "(docs/configuration.md lists every variable)"
        )


def unknown_variables(env: Mapping[str, str]) -> tuple[UnknownVariable, ...]:
    """The `FIREFLY_*` variables of `env` that are neither known nor reserved, by name.

    Known: the variables of `KNOWN_KEYS`, and `FIREFLY_SCHEDULING_LOCK_<NAME>_URL` for
    every installed provider and every first-party one (installed or not). Values are
    never looked at, so none can leak into a message.
    """
    candidates: frozenset[str] | None = None
    found = []
    for name in sorted(env):
        if not name.startswith(_FAMILY) or name.startswith(RESERVED_PREFIXES):
            continue
        if name in _KNOWN_VARIABLES:
            continue
        candidates = _known_variables() if candidates is None else candidates
        if name not in candidates:
            found.append(UnknownVariable(name, _nearest_variable(name, candidates)))
    return tuple(found)


_KNOWN_VARIABLES = frozenset(env_var(key) for key in KNOWN_KEYS)
_COMMON_HEADS = ("FIREFLY_SCHEDULING_", _FAMILY)


def _known_variables() -> frozenset[str]:
    """`_KNOWN_VARIABLES` and the URL variable of every installed or first-party provider."""
    # Imported here: reading the entry points is only needed once a variable is unknown.
    from firefly_scheduling.providers.install_hints import KNOWN_PROVIDERS  # noqa: PLC0415
    from firefly_scheduling.providers.registry import registered_providers  # noqa: PLC0415

    names = {*registered_providers(), *KNOWN_PROVIDERS}
    urls = {env_var(f"firefly.scheduling.lock.{name}.url") for name in names}
    return _KNOWN_VARIABLES | urls


def _nearest_variable(name: str, candidates: frozenset[str]) -> str | None:
    """The candidate `name` most resembles, judged without the prefix they all share."""

    def head_removed(variable: str) -> str:
        for head in _COMMON_HEADS:
            if variable.startswith(head):
                return variable[len(head) :]
        return variable

    by_rest = {head_removed(candidate): candidate for candidate in sorted(candidates)}
    match = nearest(head_removed(name), by_rest)
    return None if match is None else by_rest[match]


def _check_variables(env: Mapping[str, str], *, strict: bool) -> None:
    """Warn about each unknown `FIREFLY_*` variable of `env`; refuse them when `strict`."""
    unknown = unknown_variables(env)
    if not unknown:
        return
    if strict:
        raise ConfigurationError(
            "; ".join(str(variable) for variable in unknown)
            + f"; {env_var(STRICT_KEY)} is set, so unknown variables are refused: "
            "correct or remove them"
        )
    for variable in unknown:
        logger.warning("%s", variable)


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


def _parse_wait(env: Mapping[str, str]) -> float:
    """`firefly.scheduling.wait-for-backend`: a duration, or 0 for a single attempt."""
    key = "firefly.scheduling.wait-for-backend"
    raw = (env.get(env_var(key)) or "").strip()
    if raw in {"0", "0s", "0.0"}:
        return 0.0
    return _parse_seconds(env, key, DEFAULT_WAIT_FOR_BACKEND_SECONDS)


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


def _parse_store_url(env: Mapping[str, str], key: str) -> str:
    """The store URL under `key`, '' when unset; refused when it is no `scheme://` URL.

    Which schemes a store serves depends on what is installed, so that is checked when
    the store is resolved; the form is checked here, with the other settings.
    """
    raw = (env.get(env_var(key)) or "").strip()
    scheme, separator, _ = raw.partition("://")
    if raw and (not separator or not scheme or not scheme.replace("+", "").isalnum()):
        # No URL to redact by its rules: a password may be anywhere in it, so it is not shown.
        shown = repr(redact_url(raw)) if separator else f"{len(raw)} characters with no scheme://"
        raise ConfigurationError(
            f"{env_var(key)} ({key}) must be a URL, scheme://..., of a store an installed "
            f"provider serves, got {shown}"
        )
    return raw
