"""Choose the anchor store from `firefly.scheduling.initial-delay.store`.

The setting is a URL: `memory://`, or a URL of a scheme some installed provider's
anchor store serves (its descriptor's `store_schemes`). `''` means the lock
backend's own store, where its descriptor says it keeps the anchors at the lock's
URL (`stores_at_lock_url`), and process memory otherwise.

Stores come from the providers' descriptors (entry-point group
`firefly_scheduling.lock_providers`), the same loader as the locks, so core never
imports an adapter.
"""

from __future__ import annotations

from firefly_scheduling.initial_delay.port import AnchorStore
from firefly_scheduling.providers.building import (
    lock_store_source,
    store_url_advice,
    store_url_at_lock,
)
from firefly_scheduling.providers.registry import store_factory, store_keepers, store_schemes
from firefly_scheduling.settings import Settings, env_var
from firefly_scheduling.urls.redaction import redact_url

STORE_KEY = "firefly.scheduling.initial-delay.store"
MEMORY_URL = "memory://"


def anchor_store_url(settings: Settings) -> str:
    """The store URL in effect: the explicit setting, else the lock backend's own store."""
    explicit = settings.initial_delay_store.strip()
    return explicit or store_url_at_lock(settings, "anchor_store") or MEMORY_URL


def resolve_anchor_store(settings: Settings | None = None) -> AnchorStore:
    """Build the anchor store the configuration asks for, or refuse with a `ConfigurationError`."""
    settings = Settings.from_env() if settings is None else settings
    url = anchor_store_url(settings)
    explicit = bool(settings.initial_delay_store.strip())
    source = (
        f"{env_var(STORE_KEY)}={redact_url(url)!r}" if explicit else lock_store_source(settings)
    )
    factory = store_factory(
        url,
        slot="anchor_store",
        kind="initial-delay anchor store",
        source=source,
        advice="" if explicit else store_url_advice(url, settings),
    )
    store: AnchorStore = factory(url)
    return store


def shared_anchor_stores() -> str:
    """What an operator can use for anchors shared by the fleet, from what is installed.

    `redis://, sqlite://; or a lock provider that keeps them: x, y`: built from the
    descriptors, so it names only what this environment has.
    """
    stores = ", ".join(store_schemes("anchor_store")) or "(no shared store is installed)"
    keepers = ", ".join(store_keepers("anchor_store")) or "(none)"
    return f"{stores}; or a lock provider that keeps them: {keepers}"
