"""`lazy_exports`, `lock_exports`: an adapter package's public names, imported on first use.

Importing `adapter.provider` (the entry point) first runs `adapter/__init__.py`. If
that imported the lock class, loading every installed descriptor, which the store
lookup and the messages do, would import every installed driver: seconds of start-up
and a failure of an unrelated adapter's driver breaking the one in use. An adapter's
`__init__` therefore names its exports here, and a module-level `__getattr__` (PEP
562) imports each on first access; `from adapter import Lock` works as before.
`lock_exports` reads those names from the descriptor itself, so an adapter says
where its lock classes live once.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

from firefly_scheduling.providers.descriptor import LockProvider


def lazy_exports(
    package: str, exports: Mapping[str, str], *, install_hints: Mapping[str, str] | None = None
) -> Callable[[str], object]:
    """A module `__getattr__` for `package` importing each name from its module in `exports`.

    `install_hints` names, for an export whose module needs an optional extra, what to
    install: a missing dependency then raises an `ImportError` saying so.
    """

    def __getattr__(name: str) -> object:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        try:
            imported = importlib.import_module(module)
        except ImportError as err:
            hint = (install_hints or {}).get(name)
            if hint is None:
                raise
            raise ImportError(f"{name} needs {hint} ({err})") from err
        value = getattr(imported, name)
        setattr(sys.modules[package], name, value)  # the next access is a plain lookup
        return value

    return __getattr__


def lock_exports(
    package: str, provider: LockProvider, *, install_hints: Mapping[str, str] | None = None
) -> Callable[[str], object]:
    """A module `__getattr__` exporting the lock classes `provider` names, lazily.

    `provider.lock` and `provider.async_lock` must then be `"module:Class"` paths: the
    package exports each `Class`, imported from its `module` on first access.
    """
    exports: dict[str, str] = {}
    for factory in (provider.lock, provider.async_lock):
        if factory is None:
            continue
        if not isinstance(factory, str) or ":" not in factory:
            raise TypeError(
                f"the {provider.name!r} provider's lock factory {factory!r} is not a "
                "'module:Class' path; export it with lazy_exports instead"
            )
        module, _, name = factory.partition(":")
        exports[name] = module
    return lazy_exports(package, exports, install_hints=install_hints)
