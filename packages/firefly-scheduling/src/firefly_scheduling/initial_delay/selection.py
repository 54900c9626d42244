"""Choose the anchor store from `firefly.scheduling.initial-delay.store`.

The setting is a URL: `memory://`, `redis://…`, `memcached://…`, or a SQLAlchemy URL
(`sqlite:///…`, `postgresql+psycopg://…`, `mysql+pymysql://…`). `''` means the lock
backend's own store where it can hold data:

| lock provider | anchor store |
|---|---|
| `redis` | redis, at the lock's URL |
| `memcached` | memcached, at the lock's URL |
| `database` | database, at the lock's SQLAlchemy URL |
| `postgres`, `mysql` | database, on the same server and URL |
| `none`, `memory`, anything else | memory (per process) |

Stores other than memory come from the entry-point group
`firefly_scheduling.anchor_stores`, registered by the adapter distributions, so core
never imports an adapter. Each entry point is a `create_anchor_store(url)` factory.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint

from firefly_scheduling.initial_delay.memory import MemoryAnchorStore
from firefly_scheduling.initial_delay.port import AnchorStore
from firefly_scheduling.locks.redaction import redact_url
from firefly_scheduling.settings import Settings, env_var
from firefly_scheduling.store_plugins import installed_stores, load_store_factory, store_for_url

ENTRY_POINT_GROUP = "firefly_scheduling.anchor_stores"
_STORE_KEY = "firefly.scheduling.initial-delay.store"

#: Store name -> the extra that installs it.
_INSTALL_HINTS: dict[str, str] = {
    "redis": "firefly-scheduling[redis]",
    "memcached": "firefly-scheduling[memcached]",
    "database": "firefly-scheduling[database]",
}


def anchor_store_url(settings: Settings) -> str:
    """The store URL in effect: the explicit setting, else the lock backend's own store."""
    explicit = settings.initial_delay_store.strip()
    if explicit:
        return explicit
    provider = settings.lock_provider.strip().lower()
    if provider in {"redis", "memcached", "database", "postgres", "mysql"}:
        # The database store accepts the postgres and mysql providers' URLs as they are.
        return settings.url_for(provider)
    return "memory://"


def sqlalchemy_url(url: str) -> str:
    """A libpq or `mysql://` URL rewritten with the driver SQLAlchemy must use here.

    The postgres provider uses psycopg 3 and the mysql provider PyMySQL; SQLAlchemy's
    defaults for the bare schemes are other drivers, so the scheme is made explicit.
    A URL that already names a driver is returned unchanged. (The database anchor
    store does not need it, its engine maps bare schemes itself; it serves other
    stores that hand a lock provider's URL to a plain SQLAlchemy engine.)
    """
    scheme, sep, rest = url.partition("://")
    if not sep or "+" in scheme:
        return url
    driver = {
        "postgresql": "postgresql+psycopg",
        "postgres": "postgresql+psycopg",
        "mysql": "mysql+pymysql",
        "mariadb": "mariadb+pymysql",
    }.get(scheme.lower())
    return url if driver is None else f"{driver}://{rest}"


def resolve_anchor_store(settings: Settings | None = None) -> AnchorStore:
    """Build the anchor store the configuration asks for, or refuse with a `ConfigurationError`."""
    settings = Settings.from_env() if settings is None else settings
    url = anchor_store_url(settings)
    source = (
        f"{env_var(_STORE_KEY)}={redact_url(url)!r}"
        if settings.initial_delay_store.strip()
        else f"the {settings.lock_provider!r} lock provider's own store"
    )
    if store_for_url(url)[1] == "memory":
        return MemoryAnchorStore()
    factory = load_store_factory(
        url,
        group=ENTRY_POINT_GROUP,
        kind="initial-delay anchor store",
        source=source,
        install_hints=_INSTALL_HINTS,
    )
    store: AnchorStore = factory(url)
    return store


def installed_anchor_stores() -> dict[str, EntryPoint]:
    """Every anchor store registered in this environment, by name (memory is built in)."""
    return installed_stores(ENTRY_POINT_GROUP)
