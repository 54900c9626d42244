"""Install hints for the first-party providers: the ONLY place core names a backend.

Everything core knows about a backend comes from the `LockProvider` its distribution
registers. When that distribution is not installed there is no descriptor to read,
so this table says what to install: fsspec's `known_implementations`. It is used for
messages alone; nothing is chosen or built from it. `tests/test_core_names_no_backend.py`
fails on a backend name anywhere else in core's code.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InstallHint:
    """What to install for a provider, and which store URL schemes it would serve."""

    extra: str
    store_schemes: tuple[str, ...] = ()
    #: Whether its lock can be shared by the processes of one host through a local file.
    local_file: bool = False


KNOWN_PROVIDERS: dict[str, InstallHint] = {
    "postgres": InstallHint("firefly-scheduling[postgres]"),
    "mysql": InstallHint("firefly-scheduling[mysql]"),
    "database": InstallHint(
        "firefly-scheduling[database]",
        store_schemes=("sqlite", "postgresql", "postgres", "mysql", "mariadb"),
        local_file=True,
    ),
    "redis": InstallHint("firefly-scheduling[redis]", store_schemes=("redis", "rediss")),
    "memcached": InstallHint("firefly-scheduling[memcached]", store_schemes=("memcached",)),
    "etcd": InstallHint("firefly-scheduling[etcd]"),
}


def install_advice(name: str) -> str:
    """`. Install it with: pip install '…'` for a known provider `name`, else ''."""
    hint = KNOWN_PROVIDERS.get(name)
    return f". Install it with: pip install '{hint.extra}'" if hint else ""


def provider_serving_scheme(scheme: str) -> str:
    """The known provider whose stores would serve URLs of `scheme`, else ''."""
    base = scheme.lower().partition("+")[0]
    return next((name for name, hint in KNOWN_PROVIDERS.items() if base in hint.store_schemes), "")
