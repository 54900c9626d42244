"""Find a store addressed by URL (initial-delay anchors, run history) among the plugins.

Such stores live in the adapter distributions and register a `create_...(url)` factory
under an entry-point group, so core never imports an adapter. This module maps a
URL's scheme to a store name and loads that store's factory, refusing with a
`ConfigurationError` that names what was asked for, lists what is installed and says
what to install.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from firefly_scheduling.errors import ConfigurationError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

#: URL scheme (without a `+driver` suffix) -> store name.
STORE_FOR_SCHEME: dict[str, str] = {
    "memory": "memory",
    "redis": "redis",
    "rediss": "redis",
    "memcached": "memcached",
    "sqlite": "database",
    "postgresql": "database",
    "postgres": "database",
    "mysql": "database",
    "mariadb": "database",
}


def store_for_url(url: str) -> tuple[str, str]:
    """`(scheme, store name)` for `url`; an unknown scheme names a store of its own."""
    try:
        scheme = urlsplit(url).scheme.lower()
    except ValueError:
        scheme = ""
    base = scheme.partition("+")[0]
    return scheme, STORE_FOR_SCHEME.get(base, base)


def installed_stores(group: str) -> dict[str, EntryPoint]:
    """Every store registered under `group` in this environment, by name."""
    # Imported here: reading distribution metadata costs milliseconds at start-up,
    # and only a host that builds a store needs it.
    from importlib.metadata import entry_points  # noqa: PLC0415

    return {ep.name: ep for ep in entry_points(group=group)}


def load_store_factory(
    url: str,
    *,
    group: str,
    kind: str,
    source: str,
    install_hints: Mapping[str, str],
    advice: str = "",
) -> Callable[[str], Any]:
    """The factory of the store `url` asks for, or a `ConfigurationError` saying why not.

    `kind` names the store in messages ("run-history store"), `source` where the URL
    came from (already redacted), `advice` is appended to the refusal.
    """
    scheme, name = store_for_url(url)
    installed = installed_stores(group)
    entry_point = installed.get(name)
    if entry_point is None:
        message = (
            f"no {kind} for a {scheme or 'scheme-less'!r} URL ({source}); "
            f"installed stores: memory, {', '.join(sorted(installed)) or '(none)'}{advice}"
        )
        if name in install_hints:
            message += f". Install it with: pip install '{install_hints[name]}'"
        raise ConfigurationError(message)
    try:
        factory: Callable[[str], Any] = entry_point.load()
    except ImportError as err:
        raise ConfigurationError(
            f"{kind} {name!r} ({source}) is registered by {entry_point.value!r} but "
            f"cannot be imported: {err}"
        ) from err
    return factory
