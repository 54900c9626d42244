"""Choose the run-history store from `firefly.scheduling.history.url`.

The setting is a URL: `memory://` (this process only), a URL of a scheme some
installed provider's history store serves (its descriptor's `store_schemes`), or
`off`. `''` (the default) means the lock backend's own database where its
descriptor says it keeps the history at the lock's URL (`history_at_lock_url`), and
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

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.history.port import RunHistory
from firefly_scheduling.locks.redaction import redact_url
from firefly_scheduling.providers.building import registered_provider
from firefly_scheduling.providers.registry import installed_providers, store_factory
from firefly_scheduling.settings import Settings, env_var

HISTORY_KEY = "firefly.scheduling.history.url"
#: The value that turns the history off whatever the lock provider.
OFF = "off"


def history_url(settings: Settings) -> str | None:
    """The history URL in effect, or None when there is no history (see the module doc)."""
    explicit = settings.history_url.strip()
    if explicit.lower() == OFF:
        return None
    if explicit:
        return explicit
    provider = registered_provider(settings)
    if provider is None or not provider.history_at_lock_url:
        return None
    return settings.url_for(provider)


def resolve_history(settings: Settings | None = None) -> RunHistory | None:
    """Build the history the configuration asks for; None when it asks for none.

    An unknown scheme, or a store whose distribution is not installed, is a
    `ConfigurationError` naming the setting and what is installed, never a password.
    """
    settings = Settings.from_env() if settings is None else settings
    url = history_url(settings)
    if url is None:
        return None
    source = (
        f"{env_var(HISTORY_KEY)}={redact_url(url)!r}"
        if settings.history_url.strip()
        else f"the {settings.lock_provider!r} lock provider's own store"
    )
    factory = store_factory(
        url,
        slot="history_store",
        kind="run-history store",
        source=source,
        advice=f"; set {env_var(HISTORY_KEY)}={OFF} for no history",
    )
    history: RunHistory = factory(url)
    return history


def require_history(settings: Settings | None = None) -> RunHistory:
    """The configured history, or a `ConfigurationError` saying how to configure one.

    For the commands that only read or maintain the history (`runs`, `monitor`,
    `prune`), where "no history" is an operator's mistake rather than a choice.
    """
    settings = Settings.from_env() if settings is None else settings
    history = resolve_history(settings)
    if history is None:
        installed = installed_providers()
        keepers = [p.name for p in installed if p.history_at_lock_url]
        schemes = sorted(
            f"{scheme}://" for p in installed if p.history_store for scheme in p.store_schemes
        )
        raise ConfigurationError(
            f"no run history is configured: set {env_var(HISTORY_KEY)} ({HISTORY_KEY}) to a "
            f"URL of an installed history store ({', '.join(schemes) or '(none installed)'}), "
            f"or use a lock provider that keeps it by default ({', '.join(keepers) or '(none)'}) "
            f"(lock provider now: {settings.lock_provider!r})"
        )
    return history
