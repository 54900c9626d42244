"""The one loader: lock providers, and through them anchor stores and history stores.

Every provider, core's `none` and `memory` included, is a `LockProvider` registered
under the entry-point group `firefly_scheduling.lock_providers` (keyring's way: a
built-in backend is found like a plugin). Locks are looked up by provider name;
stores by the scheme of their URL, among the installed providers that declare a
store of that kind. A refusal names what was asked for, where it came from, what is
installed, and what to install (from the one table of install hints).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any
from urllib.parse import urlsplit

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.providers.descriptor import LockProvider, StoreSlot, load_factory
from firefly_scheduling.providers.install_hints import (
    KNOWN_PROVIDERS,
    install_advice,
    provider_serving_scheme,
)

ENTRY_POINT_GROUP = "firefly_scheduling.lock_providers"


def registered_providers() -> dict[str, EntryPoint]:
    """Every provider entry point in this environment, by name (nothing imported yet)."""
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def load_provider(name: str, *, source: str) -> LockProvider:
    """The descriptor of provider `name`; a `ConfigurationError` naming `source` if none.

    `source` says where the name came from (`FIREFLY_SCHEDULING_LOCK_PROVIDER='x'`).
    """
    name = name.strip().lower()
    registered = registered_providers()
    entry_point = registered.get(name)
    if entry_point is None:
        installed = ", ".join(sorted(registered)) or "(none)"
        if name in KNOWN_PROVIDERS:
            raise ConfigurationError(
                f"the lock provider {name!r} is not installed ({source}); installed "
                f"providers: {installed}{install_advice(name)}"
            )
        raise ConfigurationError(
            f"unknown lock provider {name!r} ({source}); installed providers: "
            f"{installed}{_first_party_list()}"
        )
    return _load(entry_point, source=source)


def _first_party_list() -> str:
    return f". First-party providers: none, memory, {', '.join(KNOWN_PROVIDERS)}"


def installed_providers() -> list[LockProvider]:
    """The descriptor of every installed provider, by name.

    Descriptor modules import no driver, so this is cheap; a broken one is an error
    rather than skipped, since it may be the one the configuration needs.
    """
    return [
        _load(entry_point, source=f"entry point group {ENTRY_POINT_GROUP!r}")
        for _, entry_point in sorted(registered_providers().items())
    ]


def _load(entry_point: EntryPoint, *, source: str) -> LockProvider:
    try:
        provider = entry_point.load()
    except ImportError as err:
        raise ConfigurationError(
            f"lock provider {entry_point.name!r} ({source}) is registered by "
            f"{entry_point.value!r} but cannot be imported: {err}{install_advice(entry_point.name)}"
        ) from err
    if not isinstance(provider, LockProvider):
        raise ConfigurationError(
            f"lock provider {entry_point.name!r} ({source}): {entry_point.value!r} is a "
            f"{type(provider).__name__}, not a firefly_scheduling.providers.LockProvider"
        )
    if provider.name != entry_point.name:
        raise ConfigurationError(
            f"lock provider {entry_point.name!r} ({source}): {entry_point.value!r} "
            f"describes a provider named {provider.name!r}; the names must agree"
        )
    return provider


def url_scheme(url: str) -> str:
    """The lower-case scheme of `url` ('' when it has none or cannot be read)."""
    try:
        return urlsplit(url).scheme.lower()
    except ValueError:
        return ""


def providers_with(slot: str) -> list[LockProvider]:
    """The installed providers whose descriptor fills `slot` (`"async_lock"`, a store)."""
    return [provider for provider in installed_providers() if getattr(provider, slot)]


def store_keepers(slot: StoreSlot) -> list[str]:
    """The installed providers that keep their `slot` store at the lock's URL by default."""
    return [p.name for p in installed_providers() if slot in p.stores_at_lock_url]


def store_schemes(slot: StoreSlot) -> list[str]:
    """`scheme://` of every URL an installed `slot` store serves, `memory://` left out."""
    return sorted(
        {f"{s}://" for p in providers_with(slot) for s in p.store_schemes if s != "memory"}
    )


def store_factory(
    url: str, *, slot: StoreSlot, kind: str, source: str, advice: str = ""
) -> Callable[[str], Any]:
    """The factory of the `slot` store that serves `url`, or a `ConfigurationError`.

    `kind` names the store in messages ("run-history store"), `source` where the URL
    came from (already redacted), `advice` is appended to the refusal.
    """
    scheme = url_scheme(url)
    candidates = providers_with(slot)
    for provider in candidates:
        if provider.serves_scheme(scheme):
            factory = getattr(provider, slot)
            return load_factory(factory, provider=provider, role=kind)
    accepted = sorted({f"{s}://" for p in candidates for s in p.store_schemes})
    install = install_advice(provider_serving_scheme(scheme))
    raise ConfigurationError(
        f"no {kind} for a {scheme or 'scheme-less'!r} URL ({source}); installed stores "
        f"accept: {', '.join(accepted) or '(none)'}{advice}{install}"
    )
