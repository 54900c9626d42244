"""Turn a `mysql://` URL into PyMySQL or asyncmy connection arguments, refusing what it cannot use.

Everything is checked here, at construction, so a typo fails when the lock is built
and not on the first scheduled run. Timeouts are always bounded: PyMySQL's defaults
would let a connect wait 10 s and a read wait forever, and `try_acquire` must not hang.
One URL means the same server, credentials and TLS settings to both drivers:
`asyncmy_arguments` translates PyMySQL's arguments, it does not read the URL again.
"""

from __future__ import annotations

import math
from typing import Any, Final
from urllib.parse import parse_qsl, unquote, urlsplit

from pymysql.charset import charset_by_name

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.urls.client_encodings import ascii_text_problem
from firefly_scheduling.urls.connection_url import parse_lock_url, unknown_option
from firefly_scheduling.urls.redaction import redact_url, url_secrets

#: `mysql+pymysql` and `mariadb+pymysql` are SQLAlchemy's spellings of the same driver,
#: accepted so one `DATABASE_URL` can serve this provider and the `database` one.
URL_SCHEMES: Final = ("mysql", "mariadb", "mysql+pymysql", "mariadb+pymysql")
DEFAULT_PORT: Final = 3306
DEFAULT_CHARSET: Final = "utf8mb4"
#: Seconds; each may be overridden by the URL query parameter of the same name.
DEFAULT_TIMEOUTS: Final[dict[str, float]] = {
    "connect_timeout": 5.0,
    "read_timeout": 5.0,
    "write_timeout": 5.0,
}
#: `init_command` runs on every new session, before the lock's own setup (a session's
#: sql_mode, say): every statement of the lock is ASCII with no value a session can
#: read otherwise (`protocol`), so any sql_mode serves.
_TEXT_PARAMETERS: Final = frozenset(
    {"unix_socket", "charset", "init_command", "ssl_ca", "ssl_cert", "ssl_key"}
)
_FLAG_PARAMETERS: Final = frozenset({"ssl_verify_cert", "ssl_verify_identity"})
_FLAGS: Final[dict[str, bool]] = {
    **dict.fromkeys(("1", "true", "yes", "on"), True),
    **dict.fromkeys(("0", "false", "no", "off"), False),
}
ACCEPTED_PARAMETERS: Final = tuple(
    sorted(_TEXT_PARAMETERS | _FLAG_PARAMETERS | DEFAULT_TIMEOUTS.keys())
)


def connection_arguments(url: str) -> dict[str, Any]:
    """PyMySQL keyword arguments for `url` (without `autocommit`, which the lock sets).

    `mysql://user:password@host:port/database?unix_socket=/path&charset=utf8mb4`, and
    `init_command=` (SQL run on every new session); user and password are
    percent-decoded. Any other scheme, an unknown query parameter, an unknown charset
    or one without a codec that writes ASCII as ASCII (the statements are ASCII:
    `client_encodings`), or a timeout that is not a positive number is a
    `ConfigurationError` naming the redacted URL.
    """
    parts = parse_lock_url(url, provider="mysql", schemes=URL_SCHEMES)
    arguments: dict[str, Any] = {
        "host": parts.hostname or "localhost",
        "port": parts.port or DEFAULT_PORT,
        "user": unquote(parts.username) if parts.username else None,
        "password": unquote(parts.password) if parts.password else "",
        "database": unquote(parts.path.lstrip("/")) or None,
        "charset": DEFAULT_CHARSET,
        **DEFAULT_TIMEOUTS,
    }
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        arguments[key] = _parameter(url, key, value)
    charset = charset_by_name(arguments["charset"])
    if charset is None:
        raise _refused(url, f"unknown charset {arguments['charset']!r}")
    problem = ascii_text_problem(charset.encoding)
    if problem is not None:
        raise _refused(
            url, f"charset={arguments['charset']} cannot carry its statements: {problem}"
        )
    return arguments


def shown_and_secrets(url: str) -> tuple[str, tuple[str, ...]]:
    """`url` as it may be shown (redacted), and the secrets to scrub from driver messages:
    its password as written and percent-decoded, which is what a driver would echo."""
    url = url.strip()
    password = urlsplit(url).password
    decoded = (unquote(password),) if password else ()
    return redact_url(url), url_secrets(url) + decoded


def asyncmy_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    """asyncmy's keyword arguments for the PyMySQL ones `connection_arguments` returned.

    asyncmy takes TLS as one `ssl` dict, built here the way PyMySQL builds its own
    from the `ssl_*` arguments (verify_identity implies verify_cert). It has no write
    timeout: its writes go to the event loop's buffer and never block, so a peer that
    stopped reading is caught by `read_timeout` waiting for the reply.
    """
    translated = {
        key: value
        for key, value in arguments.items()
        if key != "write_timeout" and not key.startswith("ssl_")
    }
    ssl_given = {key: value for key, value in arguments.items() if key.startswith("ssl_")}
    if ssl_given:
        identity = bool(ssl_given.get("ssl_verify_identity"))
        ssl: dict[str, Any] = {
            "ca": ssl_given.get("ssl_ca"),
            "check_hostname": identity,
            "verify_mode": True if identity else bool(ssl_given.get("ssl_verify_cert", False)),
        }
        for key in ("cert", "key"):
            if f"ssl_{key}" in ssl_given:
                ssl[key] = ssl_given[f"ssl_{key}"]
        translated["ssl"] = ssl
    return translated


def _parameter(url: str, key: str, value: str) -> str | float | bool:
    if key in _TEXT_PARAMETERS:
        if not value:
            raise _refused(url, f"{key} must not be empty")
        return value
    if key in _FLAG_PARAMETERS:
        if value.lower() not in _FLAGS:
            raise _refused(url, f"{key} must be true or false, got {value!r}")
        return _FLAGS[value.lower()]
    if key in DEFAULT_TIMEOUTS:
        try:
            seconds = float(value)
        except ValueError:
            seconds = math.nan
        if not math.isfinite(seconds) or seconds <= 0:
            raise _refused(url, f"{key} must be a positive number of seconds, got {value!r}")
        return seconds
    raise unknown_option(key, provider="mysql", known=ACCEPTED_PARAMETERS, shown=redact_url(url))


def _refused(url: str, problem: str) -> ConfigurationError:
    return ConfigurationError(f"the mysql lock provider cannot use {redact_url(url)}: {problem}")
