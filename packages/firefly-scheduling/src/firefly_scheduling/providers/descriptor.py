"""`LockProvider`: everything core needs to know about a backend, owned by the adapter.

An adapter distribution registers ONE object under the entry-point group
`firefly_scheduling.lock_providers`: a `LockProvider`. It says, as plain values,

* its `name` (the value of `FIREFLY_SCHEDULING_LOCK_PROVIDER`);
* how its URL is found: the key `firefly.scheduling.lock.<name>.url` is implied by
  the name; `url_fallbacks` are further environment variables read in order, and
  `default_url` applies when none is set (None: a URL is required);
* how to build its lock, synchronous (`lock`) and asyncio (`async_lock`), each
  called with the URL;
* its own initial-delay anchor store and run-history store, if it has any, each
  called with a store URL of one of `store_schemes`;
* its own control store, synchronous (`control_store`) and asyncio
  (`async_control_store`), if it keeps one durably, called the same way;
* which stores, when none is configured, default to the lock's own URL
  (`stores_at_lock_url`), built by whichever installed provider serves its scheme;
* its pip `extra`, for messages, and `async_install`, what to install for its asyncio
  lock when that needs more than `extra` (an asyncio driver, say);
* `url_example`, the URL form to suggest when the stores cannot use the lock's
  URL as it is written (a libpq key=value string is no URL).

Factories are given lazily, as `"module:attribute"` strings (or as callables), so
loading every installed descriptor imports no driver: reading what is installed to
write an error message costs milliseconds, and a missing driver is reported for the
one provider that needs it. This is fsspec's registry and keyring's backends, with
one object where those have a class per backend.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from firefly_scheduling.errors import ConfigurationError

#: A store slot of the descriptor: the initial-delay anchors, the run history, or the
#: control store (synchronous and asyncio).
StoreSlot = Literal["anchor_store", "history_store", "control_store", "async_control_store"]

#: A factory: a callable, or the `"module:attribute"` path of one, imported on first use.
Factory = str | Callable[..., Any]


@dataclass(frozen=True)
class LockProvider:
    """The descriptor of one lock backend (see the module docstring for each field)."""

    name: str
    lock: Factory
    async_lock: Factory | None = None
    takes_url: bool = True
    url_fallbacks: tuple[str, ...] = ()
    default_url: str | None = None
    anchor_store: Factory | None = None
    history_store: Factory | None = None
    control_store: Factory | None = None
    async_control_store: Factory | None = None
    store_schemes: tuple[str, ...] = ()
    stores_at_lock_url: tuple[StoreSlot, ...] = ()
    #: A URL template with `{path}` under which processes of one host share a lock in
    #: a local file (the demo uses it), or None.
    local_file_url: str | None = None
    extra: str | None = None
    #: What to install for the asyncio lock (a pip command and its contents), when the
    #: asyncio lock needs more than `extra`; `extra` is suggested otherwise.
    async_install: str | None = None
    #: A URL of this provider's kind, with placeholders, to suggest in messages.
    url_example: str | None = None

    def __post_init__(self) -> None:
        if not self.name or self.name != self.name.strip().lower():
            raise ConfigurationError(
                f"a lock provider's name must be non-empty lower case, got {self.name!r}"
            )

    @property
    def url_key(self) -> str:
        """The dotted configuration key of this provider's URL."""
        return f"firefly.scheduling.lock.{self.name}.url"

    def serves_scheme(self, scheme: str) -> bool:
        """Whether this provider's stores accept URLs of `scheme` (`+driver` ignored)."""
        return scheme.lower().partition("+")[0] in self.store_schemes

    def install_line(self, role: str = "lock") -> str:
        """`; reinstall it with: pip install '…'`, or '' when no extra is declared.

        For the asyncio lock (`role` "asyncio lock"), `async_install` when declared.
        """
        if role == "asyncio lock" and self.async_install:
            return f"; install it with: {self.async_install}"
        return f"; reinstall it with: pip install '{self.extra}'" if self.extra else ""


def load_factory(factory: Factory, *, provider: LockProvider, role: str) -> Callable[..., Any]:
    """The callable `factory` names, importing it now; a `ConfigurationError` if it cannot.

    `role` says which slot it fills ("lock", "async lock", "anchor store") in messages.
    """
    if not isinstance(factory, str):
        return factory
    module_name, sep, attribute = factory.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigurationError(
            f"the {provider.name!r} lock provider's {role} is {factory!r}, "
            f"which is not a 'module:attribute' path"
        )
    try:
        found: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as err:
        raise ConfigurationError(
            f"the {provider.name!r} lock provider's {role} ({factory!r}) cannot be "
            f"imported: {err}{provider.install_line(role)}"
        ) from err
    if not callable(found):
        raise ConfigurationError(
            f"the {provider.name!r} lock provider's {role} ({factory!r}) is not callable"
        )
    return found  # type: ignore[no-any-return]  # checked callable just above
