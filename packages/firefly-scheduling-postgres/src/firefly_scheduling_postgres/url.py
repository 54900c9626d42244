"""What `PgAdvisoryLock` connects with: a libpq URL or a libpq key=value string.

libpq reads two kinds of connection strings, and so does this provider:

* a URL, `postgresql://app:secret@db:5432/app?sslmode=require` (or `postgres://`);
* key=value pairs, `host=db dbname=app user=app password=secret`, values with spaces
  in single quotes. A string with an `=` and no `://` is read this way (libpq reads
  every string without a URI prefix so; one without `=` is no connection string).

Both are parsed by libpq itself (psycopg's `conninfo_to_dict`), so what is checked is
exactly what will connect. Neither ever reaches a message whole: both are shown
through `redact_url` (secret values and stray words of a key=value string become
`***`), a key=value string libpq cannot read is not shown at all, and libpq's
complaints are repeated with anything they quote masked unless it is a libpq
keyword or punctuation ('missing "=" after "S3cr3t"' would otherwise print a
password typed without its key). A parameter libpq does not know is the exception
when its name looks like one (lower-case letters, digits and `_`): it sits where no
value can, and is shown with the nearest keyword, so that a misspelt `sslmod=` can
be corrected; its value is never shown.
"""

from __future__ import annotations

import functools
import re
from typing import Final
from urllib.parse import urlsplit

import psycopg
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.suggestions import nearest
from firefly_scheduling.urls.client_encodings import LIBPQ_UTF8, libpq_encoding_problem
from firefly_scheduling.urls.connection_url import parse_lock_url, query_names
from firefly_scheduling.urls.redaction import (
    REDACTED,
    mask_option_value,
    redact_url,
    scrub,
    url_secrets,
)

URL_SCHEMES: Final = ("postgresql", "postgres")

#: libpq parameters applied only where the string does not set them. The TCP settings
#: make a statement to a vanished host fail within seconds instead of TCP's ~15 minutes.
CLIENT_DEFAULTS: Final[dict[str, str]] = {
    "connect_timeout": "5",
    "application_name": "firefly-scheduling",
    "keepalives": "1",
    "keepalives_idle": "30",
    "keepalives_interval": "10",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",
    # Names are bound in the client encoding: only UTF-8 carries every valid one, and
    # without it libpq would take PGCLIENTENCODING or the server's default.
    "client_encoding": LIBPQ_UTF8,
}
#: libpq keywords whose values are credentials.
SECRET_KEYWORDS: Final = frozenset(
    {"password", "sslpassword", "oauth_client_secret", "scram_client_key", "scram_server_key"}
)
_QUOTED = re.compile(r'"([^"]*)"')
#: libpq's complaints about a parameter it does not know: they quote its name.
_UNKNOWN_PARAMETER = re.compile(
    r'(invalid URI query parameter: |invalid connection option )"([^"]*)"'
)
#: What a parameter name looks like; anything else may be a password typed as a key.
_PARAMETER_NAME = re.compile(r"[a-z][a-z0-9_]*")
_KEY_VALUE_HINT = (
    "write key=value pairs separated by spaces, with a value that holds spaces or quotes "
    "in single quotes (password='a b'), or use a postgresql:// URL"
)


class PostgresConnection:
    """A checked connection string: what to connect with, how to show it, what to hide.

    Build it with `PostgresConnection.parse(text)`; any string libpq cannot read, or a
    URL of another kind, is a `ConfigurationError` that shows no credential.
    """

    __slots__ = ("conninfo", "secrets", "shown")

    def __init__(self, conninfo: str, shown: str, secrets: tuple[str, ...]) -> None:
        #: The libpq string to connect with, `CLIENT_DEFAULTS` filled in.
        self.conninfo = conninfo
        #: The string without its secrets, for reprs and messages.
        self.shown = shown
        #: Every secret it holds, to scrub from driver messages.
        self.secrets = secrets

    @classmethod
    def parse(cls, text: str) -> PostgresConnection:
        """Check `text` (a URL or a key=value string) and prepare it for connecting."""
        if isinstance(text, str) and "=" in text and "://" not in text:
            return _key_value_connection(text.strip())
        scheme = parse_lock_url(text, provider="postgres", schemes=URL_SCHEMES).scheme
        # libpq only knows the lower-case URI designators.
        url = scheme + text.strip()[len(scheme) :]
        shown = redact_url(url)
        for name in query_names(urlsplit(url).query):
            shown = mask_option_value(shown, name) if name not in _libpq_keywords() else shown
        given = _libpq_parse(url, f"the postgres lock provider got an invalid URL {shown}")
        _refuse_other_encodings(given, shown)
        secrets = (*url_secrets(url), *_secret_values(given))
        return cls(_with_defaults(url, given), shown, secrets)


def connection_info(url: str) -> str:
    """The libpq connection string for `url` (a URL or key=value pairs), with defaults.

    A string libpq cannot parse is a `ConfigurationError` without any credential.
    """
    return PostgresConnection.parse(url).conninfo


def _key_value_connection(text: str) -> PostgresConnection:
    given = _libpq_parse(
        text,
        "the postgres lock provider cannot read its connection string as libpq key=value "
        "pairs (the string is not shown: it may hold a password)",
        hint=_KEY_VALUE_HINT,
    )
    _refuse_other_encodings(given, "its connection string")
    secrets = (*url_secrets(text), *_secret_values(given))
    return PostgresConnection(_with_defaults(text, given), redact_url(text), secrets)


def _refuse_other_encodings(given: dict[str, str], shown: str) -> None:
    problem = libpq_encoding_problem(given.get("client_encoding"), given.get("options"))
    if problem is not None:
        raise ConfigurationError(f"the postgres lock provider cannot use {shown}: {problem}")


def _libpq_parse(text: str, refusal: str, *, hint: str = "") -> dict[str, str]:
    """libpq's reading of `text`, or a `ConfigurationError` starting with `refusal`."""
    try:
        given = conninfo_to_dict(text)
    except psycopg.ProgrammingError as err:
        reason = _masked(str(err), url_secrets(text))
    else:
        return {key: str(value) for key, value in given.items()}
    # Raised here, outside the handler: libpq's error must not ride along as __context__.
    raise ConfigurationError(f"{refusal}: {reason}" + (f"; {hint}" if hint else ""))


def _masked(libpq_message: str, secrets: tuple[str, ...]) -> str:
    """libpq's message, its quoted words masked unless they are libpq keywords.

    The name of an unknown parameter is shown, with the nearest keyword.
    """
    keywords = _libpq_keywords()
    unknown = _UNKNOWN_PARAMETER.search(libpq_message)
    if unknown is not None and _PARAMETER_NAME.fullmatch(unknown.group(2)):
        name = unknown.group(2)
        match = nearest(name, sorted(keywords))
        guess = f" (did you mean {match!r}?)" if match is not None else ""
        return scrub(f'{unknown.group(1)}"{name}"{guess}', secrets)
    masked = _QUOTED.sub(
        lambda quoted: quoted.group(0) if _harmless(quoted.group(1), keywords) else f'"{REDACTED}"',
        libpq_message.strip(),
    )
    return scrub(masked, secrets)


def _harmless(word: str, keywords: frozenset[str]) -> bool:
    """Whether libpq may be quoted saying `word`: a keyword, or punctuation like `=`."""
    return word in keywords or not any(character.isalnum() for character in word)


@functools.cache
def _libpq_keywords() -> frozenset[str]:
    return frozenset(option.keyword.decode() for option in pq.Conninfo.get_defaults())


def _secret_values(given: dict[str, str]) -> tuple[str, ...]:
    return tuple(value for key, value in given.items() if key in SECRET_KEYWORDS and value)


def _with_defaults(text: str, given: dict[str, str]) -> str:
    defaults = {key: value for key, value in CLIENT_DEFAULTS.items() if key not in given}
    return make_conninfo(text, **defaults)
