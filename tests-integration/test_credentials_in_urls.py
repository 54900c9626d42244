"""A password never leaks through a malformed or unusual URL.

Every way a URL enters the library (each provider's lock, each anchor store, the
database run history, and the settings-driven resolvers that build them) meets one
fixed set of nasty URLs: passwords holding `/`, `#`, `?`, `@`, `:` and `%`, a bad
port, a bad scheme, a password in the query, libpq key=value strings, and text with
no scheme at all. Whatever happens (a refusal, or a lock that then fails to reach
127.0.0.1:1, where nothing listens), no part of the password may appear in:

* the exception's message or repr, nor in any exception of its chain
  (`__cause__`, `__context__`), nor in the formatted traceback;
* the repr or str of an object that was built;
* any log record, message or attached traceback, at any level.

No server is needed: nothing listens on port 1, so a connection attempt fails at once.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from firefly_scheduling import Settings
from firefly_scheduling.control.selection import resolve_control_store
from firefly_scheduling.errors import ConfigurationError, FireflySchedulingError
from firefly_scheduling.history.selection import resolve_history
from firefly_scheduling.initial_delay.selection import resolve_anchor_store
from firefly_scheduling.locks.providers import resolve_lock
from firefly_scheduling_database import AsyncDatabaseLeaseLock, DatabaseLeaseLock
from firefly_scheduling_database.anchor_store import DatabaseAnchorStore
from firefly_scheduling_database.control_store import DatabaseControlStore
from firefly_scheduling_database.sql_history.store import SqlRunHistory
from firefly_scheduling_etcd import EtcdLock
from firefly_scheduling_etcd.control_store import EtcdControlStore
from firefly_scheduling_memcached import MemcachedLock
from firefly_scheduling_memcached.anchor_store import MemcachedAnchorStore
from firefly_scheduling_mysql import MySqlNamedLock
from firefly_scheduling_postgres import PgAdvisoryLock
from firefly_scheduling_redis import RedisLock
from firefly_scheduling_redis.anchor_store import RedisAnchorStore
from firefly_scheduling_redis.control_store import RedisControlStore

# Two distinctive halves: a special character between them must not let either out.
LEFT, RIGHT = "Alpha7Secret", "Omega9Secret"
ADDRESS = "127.0.0.1:1"


@dataclass(frozen=True)
class NastyUrl:
    """A URL template (`{scheme}` is the entry path's) and the texts that must not leak."""

    name: str
    template: str
    secrets: tuple[str, ...]

    def url(self, scheme: str) -> str:
        return self.template.format(scheme=scheme)


def _halves(separator: str) -> NastyUrl:
    password = f"{LEFT}{separator}{RIGHT}"
    return NastyUrl(
        f"password with {separator!r}",
        f"{{scheme}}://user:{password}@{ADDRESS}/db",
        (password, LEFT, RIGHT),
    )


NASTY_URLS = [
    *(_halves(separator) for separator in ["/", "#", "?", "@", ":", "%", "%41", "/#?@:%"]),
    NastyUrl(
        "percent-encoded specials",
        f"{{scheme}}://user:{LEFT}%2F%23%3F%40{RIGHT}@{ADDRESS}/db",
        (LEFT, RIGHT),
    ),
    NastyUrl("user only, slash", f"{{scheme}}://{LEFT}/{RIGHT}@{ADDRESS}/db", (RIGHT,)),
    NastyUrl("bad port", f"{{scheme}}://user:{LEFT}@127.0.0.1:notaport/db", (LEFT,)),
    NastyUrl("port out of range", f"{{scheme}}://user:{LEFT}@127.0.0.1:99999/db", (LEFT,)),
    NastyUrl("password as the port", f"{{scheme}}://user:{LEFT}/x@{ADDRESS}/db", (LEFT,)),
    NastyUrl("bad scheme", f"ftp://user:{LEFT}@{ADDRESS}/db", (LEFT,)),
    NastyUrl("upper-case scheme", f"REDIS://user:{LEFT}#{RIGHT}@{ADDRESS}/0", (LEFT, RIGHT)),
    NastyUrl("password in the query", f"{{scheme}}://user@{ADDRESS}/db?password={LEFT}", (LEFT,)),
    NastyUrl("broken IPv6 host", f"{{scheme}}://user:{LEFT}@[::1/db", (LEFT,)),
    NastyUrl("no scheme", f"user:{LEFT}@{ADDRESS}", (LEFT,)),
    NastyUrl("key=value", f"host=127.0.0.1 port=1 dbname=db user=u password={LEFT}", (LEFT,)),
    NastyUrl(
        "key=value, quoted", f"host=127.0.0.1 port=1 password='{LEFT} {RIGHT}'", (LEFT, RIGHT)
    ),
    NastyUrl(
        "key=value, escaped", f"host=127.0.0.1 port=1 password={LEFT}\\ {RIGHT}", (LEFT, RIGHT)
    ),
    NastyUrl("key=value, missing =", f"host=127.0.0.1 password {LEFT}", (LEFT,)),
    NastyUrl("key=value, stray word", f"host=127.0.0.1 {LEFT}", (LEFT,)),
    NastyUrl("key=value, unknown key", f"hots=127.0.0.1 password={LEFT}", (LEFT,)),
    NastyUrl("key=value, open quote", f"host=127.0.0.1 password='{LEFT}", (LEFT,)),
]


@dataclass(frozen=True)
class EntryPath:
    name: str
    scheme: str
    build: Callable[[str], Any]


def _lock_from_settings(provider: str) -> Callable[[str], Any]:
    def build(url: str) -> Any:
        variable = f"FIREFLY_SCHEDULING_LOCK_{provider.upper()}_URL"
        env = {"FIREFLY_SCHEDULING_LOCK_PROVIDER": provider, variable: url}
        return resolve_lock(Settings.from_env(env))

    return build


class _Awaited:
    """An asyncio lock driven from these synchronous cases, a fresh event loop per call."""

    def __init__(self, url: str) -> None:
        self._lock = AsyncDatabaseLeaseLock(url)

    def __repr__(self) -> str:
        return repr(self._lock)

    def try_acquire(self, name: str, ttl_seconds: float) -> bool:
        return asyncio.run(self._lock.try_acquire(name, ttl_seconds))

    def close(self) -> None:
        asyncio.run(self._lock.aclose())


ENTRY_PATHS = [
    EntryPath("PgAdvisoryLock", "postgresql", PgAdvisoryLock),
    EntryPath("MySqlNamedLock", "mysql", MySqlNamedLock),
    EntryPath("DatabaseLeaseLock on PostgreSQL", "postgresql", DatabaseLeaseLock),
    EntryPath("DatabaseLeaseLock on MariaDB", "mysql", DatabaseLeaseLock),
    EntryPath("AsyncDatabaseLeaseLock on PostgreSQL", "postgresql", _Awaited),
    EntryPath("AsyncDatabaseLeaseLock on MariaDB", "mysql", _Awaited),
    EntryPath("RedisLock", "redis", RedisLock),
    EntryPath("RedisLock on a cluster", "redis+cluster", RedisLock),
    EntryPath("MemcachedLock", "memcached", MemcachedLock),
    EntryPath("EtcdLock", "etcd", EtcdLock),
    EntryPath("RedisAnchorStore", "redis", RedisAnchorStore),
    EntryPath("RedisAnchorStore on a cluster", "redis+cluster", RedisAnchorStore),
    EntryPath("MemcachedAnchorStore", "memcached", MemcachedAnchorStore),
    EntryPath("DatabaseAnchorStore", "postgresql", DatabaseAnchorStore),
    EntryPath("SqlRunHistory", "postgresql", SqlRunHistory),
    *(
        EntryPath(f"provider {provider}", scheme, _lock_from_settings(provider))
        for provider, scheme in [
            ("postgres", "postgresql"),
            ("mysql", "mysql"),
            ("database", "postgresql"),
            ("redis", "redis"),
            ("memcached", "memcached"),
            ("etcd", "etcd"),
        ]
    ),
    EntryPath(
        "anchor store setting",
        "redis",
        lambda url: resolve_anchor_store(Settings(initial_delay_store=url)),
    ),
    EntryPath(
        "history setting", "postgresql", lambda url: resolve_history(Settings(history_url=url))
    ),
    EntryPath("Settings repr", "postgresql", lambda url: Settings(lock_urls={"postgres": url})),
    EntryPath("DatabaseControlStore on PostgreSQL", "postgresql", DatabaseControlStore),
    EntryPath("DatabaseControlStore on MariaDB", "mysql", DatabaseControlStore),
    EntryPath("RedisControlStore", "redis", RedisControlStore),
    EntryPath("RedisControlStore on a cluster", "redis+cluster", RedisControlStore),
    EntryPath("EtcdControlStore", "etcd", EtcdControlStore),
    EntryPath(
        "control store setting",
        "redis",
        lambda url: resolve_control_store(Settings(control_url=url)),
    ),
    EntryPath(
        "control store environment setting",
        "postgresql",
        lambda url: resolve_control_store(
            Settings.from_env(
                {
                    "FIREFLY_SCHEDULING_LOCK_PROVIDER": "memcached",
                    "FIREFLY_SCHEDULING_CONTROL_URL": url,
                }
            )
        ),
    ),
]


def _exercise(built: Any) -> None:
    """Make a built object reach for its server, which fails: nothing listens there."""
    if hasattr(built, "try_acquire"):
        built.try_acquire("report", 5.0)
    elif hasattr(built, "add"):
        built.add("report", "anchor")
    elif hasattr(built, "runs"):
        built.runs()
    elif hasattr(built, "pause_of"):
        built.pause_of("app.jobs:report")


def _texts_of(error: BaseException) -> Iterator[str]:
    """Everything an exception, its chain and its traceback could print."""
    yield "".join(traceback.format_exception(error))
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield str(current)
        yield repr(current)
        yield from (str(arg) for arg in current.args)
        pending += [current.__cause__, current.__context__]


def _assert_hidden(texts: Iterator[str] | list[str], nasty: NastyUrl, where: str) -> None:
    for text in texts:
        for secret in nasty.secrets:
            assert secret not in text, f"{where} shows {secret!r}:\n{text}"


@pytest.mark.parametrize("nasty", NASTY_URLS, ids=lambda nasty: nasty.name)
@pytest.mark.parametrize("path", ENTRY_PATHS, ids=lambda path: path.name)
def test_no_part_of_a_password_leaks(
    path: EntryPath, nasty: NastyUrl, caplog: pytest.LogCaptureFixture
) -> None:
    url = nasty.url(path.scheme)
    caplog.set_level(logging.DEBUG)
    errors: list[BaseException] = []
    built: Any = None
    try:
        built = path.build(url)
        _assert_hidden([repr(built), str(built)], nasty, f"{path.name} repr")
        _exercise(built)
    except (FireflySchedulingError, ValueError, TypeError, OSError) as err:
        errors.append(err)
    finally:
        if built is not None and hasattr(built, "close"):
            try:
                built.close()
            except FireflySchedulingError as err:
                errors.append(err)
    for error in errors:
        _assert_hidden(_texts_of(error), nasty, f"{path.name} error")
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    _assert_hidden([formatter.format(record) for record in caplog.records], nasty, "a log")


def _refusal(build: Callable[[str], Any], url: str) -> ConfigurationError:
    with pytest.raises(ConfigurationError) as raised:
        build(url)
    return raised.value


@pytest.mark.parametrize("separator", ["/", "#", "?", "@"])
@pytest.mark.parametrize(
    "path", [p for p in ENTRY_PATHS if "setting" not in p.name and "repr" not in p.name],
    ids=lambda path: path.name,
)  # fmt: skip
def test_a_special_character_in_a_password_is_refused_asking_to_percent_encode(
    path: EntryPath, separator: str
) -> None:
    url = f"{path.scheme}://user:{LEFT}{separator}{RIGHT}@{ADDRESS}/db"
    message = str(_refusal(path.build, url))
    assert "percent-encode" in message
    assert "%23" in message
    assert "user:***@" in message


# The first thirteen entry paths are the adapters' own lock and store classes.
@pytest.mark.parametrize("path", ENTRY_PATHS[:13], ids=lambda path: path.name)
def test_a_lock_or_store_never_echoes_a_value_that_is_not_a_url(path: EntryPath) -> None:
    # A bare word holds no credential by redaction's rules (a setting may read `off`),
    # so it is only the adapters that must never echo it: it may be a pasted password.
    message = str(_refusal(path.build, LEFT))
    assert LEFT not in message
    assert "not shown" in message


def test_the_urllib_port_error_is_no_longer_echoed() -> None:
    message = str(_refusal(RedisLock, "redis://user:Sup3rS3cret/x@host"))
    assert "Sup3rS3cret" not in message
    assert "Port could not be cast" not in message
    assert message.startswith("the redis lock provider cannot use the URL redis://user:***@host")


@pytest.mark.parametrize("url", ["redis://user:pw@127.0.0.1:99999/0", "redis://u:pw@h:port/0"])
def test_a_bad_port_is_named_as_such(url: str) -> None:
    assert "port is not a whole number from 0 to 65535" in str(_refusal(RedisLock, url))


def test_a_libpq_key_value_string_is_accepted_and_shown_redacted() -> None:
    lock = PgAdvisoryLock(f"host=127.0.0.1 port=1 dbname=app user=u password={LEFT}")
    assert repr(lock) == ("PgAdvisoryLock('host=127.0.0.1 port=1 dbname=app user=u password=***')")
    with pytest.raises(FireflySchedulingError) as raised:
        lock.try_acquire("report", 5.0)
    assert "postgres lock backend host=127.0.0.1 port=1" in str(raised.value)
    lock.close()


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (f"hots=db password={LEFT}", 'invalid connection option "hots"'),  # a name, shown
        (f"host=db password {LEFT}", 'missing "=" after "password"'),
        (f"host=db password='{LEFT}", "unterminated quoted string"),
    ],
)
def test_a_libpq_string_libpq_cannot_read_is_refused_with_its_reason(
    text: str, reason: str
) -> None:
    message = str(_refusal(PgAdvisoryLock, text))
    assert reason in message
    assert "key=value" in message
    assert LEFT not in message
