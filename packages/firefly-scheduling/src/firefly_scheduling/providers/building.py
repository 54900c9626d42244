"""Build the configured provider's lock, in either flavour, from its descriptor.

`resolve_lock` and `aio.resolve_async_lock` are this one function with a different
slot: the same provider key, the same URL keys, the same refusals. A provider that
has no lock of the asked flavour is refused by name; it never falls back to the
other flavour, because a blocking lock inside an event loop stalls every task.
"""

from __future__ import annotations

from typing import Any, Literal

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.providers.descriptor import LockProvider, StoreSlot, load_factory
from firefly_scheduling.providers.registry import (
    load_provider,
    providers_with,
    registered_providers,
)
from firefly_scheduling.settings import Settings, env_var

PROVIDER_KEY = "firefly.scheduling.lock.provider"

#: The descriptor slot of each flavour, and how messages name it.
_ROLES: dict[str, str] = {"lock": "lock", "async_lock": "asyncio lock"}


def provider_source(settings: Settings) -> str:
    """Where the provider name came from, for messages: `FIREFLY_…_PROVIDER='x'`."""
    return f"{env_var(PROVIDER_KEY)}={settings.lock_provider!r}"


def configured_provider(settings: Settings) -> LockProvider:
    """The descriptor of the provider `settings` names, or a `ConfigurationError`."""
    return load_provider(settings.lock_provider, source=provider_source(settings))


def registered_provider(settings: Settings) -> LockProvider | None:
    """The configured provider's descriptor, or None when no such provider is installed.

    For the stores: with an explicit lock (a library host given `lock=`), the provider
    setting may name nothing, and the stores then have no backend of their own. The
    configured lock itself is refused by `build_lock`.
    """
    if settings.lock_provider.strip().lower() not in registered_providers():
        return None
    return configured_provider(settings)


def store_url_at_lock(settings: Settings, slot: StoreSlot) -> str | None:
    """The lock's URL when the configured provider keeps its `slot` store there, else None."""
    provider = registered_provider(settings)
    if provider is None or slot not in provider.stores_at_lock_url:
        return None
    return settings.url_for(provider)


def build_lock(settings: Settings, slot: Literal["lock", "async_lock"]) -> Any:
    """The configured provider's lock of the flavour `slot` names, built with its URL."""
    provider = configured_provider(settings)
    factory = getattr(provider, slot)
    if factory is None:
        raise ConfigurationError(
            f"the {provider.name!r} lock provider ({provider_source(settings)}) has no "
            f"{_ROLES[slot]}; use its {_ROLES['lock']} from synchronous code, or a "
            f"provider that has one: {', '.join(p.name for p in providers_with(slot)) or '(none)'}"
        )
    build = load_factory(factory, provider=provider, role=_ROLES[slot])
    if not provider.takes_url:
        return build()
    url = settings.url_for(provider)
    try:
        return build(url)
    except ConfigurationError as err:
        raise ConfigurationError(
            f"{err} (the URL came from {settings.url_source(provider)})"
        ) from err


def lock_store_source(settings: Settings) -> str:
    """How a message names a store kept at the lock's URL, and where that URL came from."""
    provider = registered_provider(settings)
    origin = "" if provider is None else f", its URL came from {settings.url_source(provider)}"
    return f"the {settings.lock_provider!r} lock provider's own store{origin}"


def store_url_advice(url: str, settings: Settings) -> str:
    """What to write instead of a store URL that is no URL at all (a key=value string)."""
    if "://" in url or "=" not in url:
        return ""
    provider = registered_provider(settings)
    example = provider.url_example if provider is not None else None
    form = f" such as {example}" if example else ""
    return (
        f"; a key=value connection string is no URL and the stores need one: write it as "
        f"a URL{form}"
    )
