"""Choose the run-history store from `firefly.scheduling.history.url`.

The setting is a URL: `memory://` (this process only), a URL of a scheme some
installed provider's history store serves (its descriptor's `store_schemes`), or
`off`. `''` (the default) means the lock backend's own database where its
descriptor says it keeps the history at the lock's URL (`stores_at_lock_url`), and
no history otherwise.

Why on by default where a database is at hand: adopting a died run needs the
history (it is where the run is found), and a table next to the lock's costs nothing
to set up. Why not elsewhere: a per-process memory history would make `runs` and
`monitor`, which run in another process, report nothing while looking healthy.

Stores come from the providers' descriptors (entry-point group
`firefly_scheduling.lock_providers`), the same loader as the locks, so core never
imports an adapter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.history.port import RunHistory
from firefly_scheduling.providers.building import (
    lock_store_source,
    store_url_advice,
    store_url_at_lock,
)
from firefly_scheduling.providers.registry import store_factory, store_keepers, store_schemes
from firefly_scheduling.settings import Settings, env_var
from firefly_scheduling.urls.redaction import redact_url

HISTORY_KEY = "firefly.scheduling.history.url"
#: The value that turns the history off whatever the lock provider.
OFF = "off"


def history_url(settings: Settings) -> str | None:
    """The history URL in effect, or None when there is no history (see the module doc)."""
    explicit = settings.history_url.strip()
    if explicit.lower() == OFF:
        return None
    return explicit or store_url_at_lock(settings, "history_store")


def resolve_history(settings: Settings | None = None) -> RunHistory | None:
    """Build the history the configuration asks for; None when it asks for none.

    An unknown scheme, or a store whose distribution is not installed, is a
    `ConfigurationError` naming the setting and what is installed, never a password.
    """
    settings = Settings.from_env() if settings is None else settings
    found = history_factory(settings)
    if found is None:
        return None
    url, factory = found
    history: RunHistory = factory(url)
    return history


def history_factory(settings: Settings) -> tuple[str, Callable[[str], Any]] | None:
    """The history URL and the factory that serves it, checked, nothing built or reached.

    None when there is no history. A host checks this before it waits for its lock
    backend, since no wait can fix a history URL no store accepts.
    """
    url = history_url(settings)
    if url is None:
        return None
    explicit = bool(settings.history_url.strip())
    source = (
        f"{env_var(HISTORY_KEY)}={redact_url(url)!r}" if explicit else lock_store_source(settings)
    )
    advice = "" if explicit else store_url_advice(url, settings)
    factory = store_factory(
        url,
        slot="history_store",
        kind="run-history store",
        source=source,
        advice=f"{advice}; or set {env_var(HISTORY_KEY)}={OFF} for no history",
    )
    return url, factory


def require_history(settings: Settings | None = None) -> RunHistory:
    """The configured history, or a `ConfigurationError` saying how to configure one.

    For the commands that only read or maintain the history (`runs`, `monitor`,
    `prune`), where "no history" is an operator's mistake rather than a choice.
    """
    settings = Settings.from_env() if settings is None else settings
    history = resolve_history(settings)
    if history is None:
        schemes = ", ".join(store_schemes("history_store")) or "(none installed)"
        keepers = ", ".join(store_keepers("history_store")) or "(none)"
        raise ConfigurationError(
            f"no run history is configured: set {env_var(HISTORY_KEY)} ({HISTORY_KEY}) to a "
            f"URL of an installed history store ({schemes}), or use a lock provider that "
            f"keeps it by default ({keepers}) (lock provider now: {settings.lock_provider!r})"
        )
    return history
