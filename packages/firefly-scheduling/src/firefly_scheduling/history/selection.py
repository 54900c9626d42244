"""Choose the run-history store from `firefly.scheduling.history.url`.

The setting is a URL: `memory://` (this process only), a SQLAlchemy URL
(`sqlite:///…`, `postgresql://…`, `mysql://…`), or `off`. `''` (the default) means
the lock backend's own SQL database where it has one, and no history otherwise:

| lock provider | history |
|---|---|
| `database` | the database store, at the lock's SQLAlchemy URL |
| `postgres`, `mysql` | the database store, on the same server (URL rewritten for SQLAlchemy) |
| `redis`, `memcached`, `none`, `memory` | none; set the URL to get one |

Why on by default where a SQL database is at hand: adopting a died run needs the
history (it is where the run is found), and a table next to the lock's costs nothing
to set up. Why not elsewhere: a per-process memory history would make `runs` and
`monitor`, which run in another process, report nothing while looking healthy.

Stores other than memory come from the entry-point group
`firefly_scheduling.history_stores` (`create_history_store(url)` factories registered
by adapter distributions), so core never imports an adapter.
"""

from __future__ import annotations

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.history.memory import MemoryRunHistory
from firefly_scheduling.history.port import RunHistory
from firefly_scheduling.initial_delay.selection import sqlalchemy_url
from firefly_scheduling.locks.redaction import redact_url
from firefly_scheduling.settings import Settings, env_var
from firefly_scheduling.store_plugins import load_store_factory, store_for_url

ENTRY_POINT_GROUP = "firefly_scheduling.history_stores"
HISTORY_KEY = "firefly.scheduling.history.url"
#: The value that turns the history off whatever the lock provider.
OFF = "off"

_INSTALL_HINTS: dict[str, str] = {"database": "firefly-scheduling[database]"}


def history_url(settings: Settings) -> str | None:
    """The history URL in effect, or None when there is no history (see the module doc)."""
    explicit = settings.history_url.strip()
    if explicit.lower() == OFF:
        return None
    if explicit:
        return explicit
    provider = settings.lock_provider.strip().lower()
    if provider == "database":
        return settings.url_for(provider)
    if provider in {"postgres", "mysql"}:
        return sqlalchemy_url(settings.url_for(provider))
    return None


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
        else f"the {settings.lock_provider!r} lock provider's database"
    )
    if store_for_url(url)[1] == "memory":
        return MemoryRunHistory()
    factory = load_store_factory(
        url,
        group=ENTRY_POINT_GROUP,
        kind="run-history store",
        source=source,
        install_hints=_INSTALL_HINTS,
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
        raise ConfigurationError(
            f"no run history is configured: set {env_var(HISTORY_KEY)} ({HISTORY_KEY}) to a "
            f"SQLAlchemy URL, or use the database, postgres or mysql lock provider, whose "
            f"database keeps it by default (lock provider now: {settings.lock_provider!r})"
        )
    return history
