"""Keep credentials out of messages, logs and reprs.

Lock URLs routinely carry passwords (`redis://:secret@host`,
`postgresql://app:secret@db/app`). Anything that may end up in a log line goes
through `redact_url` first, and driver messages through `scrub`.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

REDACTED = "***"
_SECRET_QUERY_KEYS = frozenset(
    {"password", "passwd", "pass", "pwd", "secret", "token", "sslpassword"}
)


def redact_url(url: str) -> str:
    """Return `url` with its password (and password-like query values) replaced by `***`."""
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises ValueError on a malformed port, which we must not echo
    except ValueError:
        return "<unparseable URL>"
    if not url_secrets(url) and "@" not in parts.netloc:
        return url  # nothing to hide; urlunsplit would also mangle sqlite:////abs/path
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostinfo = netloc.rpartition("@")
        user, has_password, _ = userinfo.partition(":")
        netloc = f"{user}:{REDACTED}@{hostinfo}" if has_password else f"{user}@{hostinfo}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode(
            [(key, REDACTED if key.lower() in _SECRET_QUERY_KEYS else val) for key, val in pairs],
            safe="*",
        )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def url_secrets(url: str) -> tuple[str, ...]:
    """The secret strings inside `url`, so `scrub` can remove them from driver messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ()
    found = [parts.password] if parts.password else []
    found += [
        value
        for key, value in parse_qsl(parts.query, keep_blank_values=True)
        if key.lower() in _SECRET_QUERY_KEYS and value
    ]
    return tuple(found)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """Replace every occurrence of each secret in `text` with `***`."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text
