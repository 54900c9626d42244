"""Choose the control store from `firefly.scheduling.control.url`.

The setting is a URL of a scheme some installed provider's control store serves (a
SQLAlchemy URL, `redis://`, `redis+cluster://`, `etcd://`; `memory://` for tests).
`''` (the default) means the lock backend's own server, where its descriptor says it
keeps a control store there (`stores_at_lock_url`). Where it keeps none (memcached,
which may evict any item; `none`; `memory`), resolving refuses with a
`ConfigurationError` naming the setting: a pause that an eviction silently lifts, or
that other nodes never see, would be worse than no pause at all.

Stores come from the providers' descriptors, the same loader as the locks, so core
never imports an adapter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from firefly_scheduling.control.store import ControlStore
from firefly_scheduling.control.store_async import AsyncControlStore
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.providers.building import (
    lock_store_source,
    store_url_advice,
    store_url_at_lock,
)
from firefly_scheduling.providers.registry import (
    installed_providers,
    store_factory,
    store_keepers,
    store_schemes,
    url_scheme,
)
from firefly_scheduling.settings import CONTROL_URL_KEY, Settings, env_var
from firefly_scheduling.urls.redaction import redact_url

_Slot = Literal["control_store", "async_control_store"]


def control_store_url(settings: Settings) -> str:
    """The control store's URL in effect, or a `ConfigurationError` when there is none."""
    explicit = settings.control_url.strip()
    url = explicit or store_url_at_lock(settings, "control_store")
    if url:
        return url
    schemes = ", ".join(s for s in store_schemes("control_store")) or "(none installed)"
    keepers = ", ".join(store_keepers("control_store")) or "(none)"
    raise ConfigurationError(
        f"the {settings.lock_provider!r} lock provider keeps no durable control store "
        f"(pauses, triggers, backfills, runtime schedules): set {env_var(CONTROL_URL_KEY)} "
        f"({CONTROL_URL_KEY}) to a URL of an installed control store ({schemes}), or use a "
        f"lock provider that keeps one ({keepers})"
    )


def resolve_control_store(settings: Settings | None = None) -> ControlStore:
    """The synchronous control store the configuration names, or a `ConfigurationError`."""
    store: ControlStore = _factory(settings, "control_store")[1]
    return store


def resolve_async_control_store(settings: Settings | None = None) -> AsyncControlStore:
    """The asyncio control store the configuration names, or a `ConfigurationError`."""
    store: AsyncControlStore = _factory(settings, "async_control_store")[1]
    return store


def _factory(settings: Settings | None, slot: _Slot) -> tuple[str, Any]:
    settings = Settings.from_env() if settings is None else settings
    url = control_store_url(settings)
    explicit = bool(settings.control_url.strip())
    source = (
        f"{env_var(CONTROL_URL_KEY)}={redact_url(url)!r}"
        if explicit
        else lock_store_source(settings)
    )
    _refuse_undurable_scheme(url, source)
    build: Callable[[str], Any] = store_factory(
        url,
        slot=slot,
        kind="control store" if slot == "control_store" else "asyncio control store",
        source=source,
        advice="" if explicit else store_url_advice(url, settings),
    )
    return url, build(url)


def _refuse_undurable_scheme(url: str, source: str) -> None:
    """Refuse a URL of an installed backend that keeps no control store, saying so."""
    scheme = url_scheme(url).partition("+")[0]
    servers = [p for p in installed_providers() if p.serves_scheme(scheme)]
    if servers and not any(p.control_store for p in servers):
        names = ", ".join(repr(p.name) for p in servers)
        durable = ", ".join(store_schemes("control_store")) or "(none installed)"
        raise ConfigurationError(
            f"the {names} provider keeps no control store ({source}): a control store must "
            f"keep what it is told durably, and this server may drop it; name one of: {durable}"
        )
