"""Keep credentials out of messages, logs and reprs, for any string whatsoever.

Lock and store URLs routinely carry passwords (`redis://:secret@host`,
`postgresql://app:secret@db/app`, libpq's `host=db password=secret`). Anything that
may end up in a log line goes through `redact_url` first, and driver messages
through `scrub` with the secrets `url_secrets` found.

Neither function parses the URL the way a driver would, because a malformed URL is
exactly where parsers disagree: `redis://user:pa#ss@host` is, to urllib, the host
`user` on port `pa` followed by a fragment. The rules are conservative instead:

* Everything between `://` (or the start of the text, if it has none) and the
  **last** `@` is userinfo, and everything after its first `:` is a password. A
  user name holding a character no user name can (`/`, `?`, `#`, `@`) may be part
  of a password too, and is hidden with it.
* The value of a password-like key is a secret, in a URL query (`?password=x`) or
  a libpq key=value string (`password=x`, `password='x y'`); it runs to the next
  `&` or unescaped space, or to the closing quote.
  The keys: `pass`, `pwd`, any key ending in `password`, `passwd`, `secret` or
  `token` (`sslpassword`, `oauth_client_secret`), and libpq's `scram_*_key`.
* In a key=value string (text with an `=` and no `://`), a word that is not a
  `key=value` pair is hidden too: `password secret` lacks only its `=`.

Text with no `://`, `@` or `=` holds no credential by these rules and is shown as it
is (`off`, `memory`): a lock or store never shows such a value, which is no URL.

`url_secrets` also returns each secret percent-decoded and unquoted, and the
password urllib would read from a malformed URL (a piece of the real one), which is
how a driver would echo them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

REDACTED = "***"
# `password`, `sslpassword`, `oauth_client_secret`, `auth_token`, `scram_client_key`...
_SECRET_KEYS = r"\w*(?:passw(?:or)?d|secret|token)|pass|pwd|scram_\w*key"  # noqa: S105 - key names, no password
# A secret key's value: a libpq single-quoted value (backslash escapes), or a bare run
# up to the next `&` (query) or whitespace (libpq). The key must start the text or
# follow a separator, so `nopassword=` or `user=password` are not keys.
# A value: libpq's single-quoted form, or a bare run up to the next `&` (query) or
# whitespace (libpq); a backslash escapes the next character in both.
_VALUE = r"'(?:[^'\\]|\\.)*'?|(?:[^\s&\\]|\\.)*\\?"
_SECRET_PAIR = re.compile(
    rf"(?<![^\s?&;])(?P<key>{_SECRET_KEYS})(?P<equals>\s*=\s*)(?P<value>{_VALUE})",
    re.IGNORECASE,
)
# A key=value string (libpq's other form) read token by token: a pair, or anything
# else, which is a stray word that may well be a password typed without its key.
_KEY_VALUE_TOKEN = re.compile(rf"(?P<space>\s*)(?:(?P<pair>\w+\s*=\s*(?:{_VALUE}))|(?P<other>\S+))")
_BACKSLASH_ESCAPE = re.compile(r"\\(.)")


def redact_url(url: str) -> str:
    """`url` with every password and password-like value replaced by `***`.

    Works on any string, including ones no parser accepts; a string with nothing to
    hide is returned unchanged (a SQLite path, a trusted local server).
    """
    text = str(url)
    if "://" not in text and "=" in text:
        return _redact_key_values(text)
    head, userinfo, rest = _split_userinfo(text)
    if userinfo is not None:
        user, colon, _ = userinfo.partition(":")
        if _malformed_user(user, head, text):
            text = f"{head}{REDACTED}@{rest}"
        else:
            text = f"{head}{user}{':' + REDACTED if colon else ''}@{rest}"
    return _redact_pairs(text)


def url_secrets(url: str) -> tuple[str, ...]:
    """The secret strings inside `url`, so `scrub` can remove them from driver messages.

    Each secret comes as written and, where different, percent-decoded or unquoted.
    """
    text = str(url)
    found: list[str] = []
    head, userinfo, _ = _split_userinfo(text)
    if userinfo is not None:
        user, _, password = userinfo.partition(":")
        found.append(password)
        if _malformed_user(user, head, text):
            found.append(user)
    try:
        parsed_password = urlsplit(text).password
    except ValueError:
        parsed_password = None
    if parsed_password:
        found.append(parsed_password)
    for match in _SECRET_PAIR.finditer(text):
        value = match.group("value")
        found.append(value)
        unquoted = value[1:].removesuffix("'") if value.startswith("'") else value
        found.append(_BACKSLASH_ESCAPE.sub(r"\1", unquoted))
    secrets: dict[str, None] = {}  # ordered and without duplicates
    for secret in found:
        for form in (secret, unquote(secret)):
            if form:
                secrets[form] = None
    return tuple(secrets)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """Replace every occurrence of each secret in `text` with `***`.

    Longer secrets go first, so a secret that contains a shorter one is removed
    whole rather than leaving its other characters behind.
    """
    scrubbed = str(text)
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        scrubbed = scrubbed.replace(secret, REDACTED)
    return scrubbed


def mask_option_value(url: str, name: str) -> str:
    """`url` with the value of its query option `name` replaced by `***`.

    For an option no rule above knows to be secret (`passwrod=` is a misspelt
    password): its value is shown nowhere, whatever its name.
    """
    pattern = re.compile(rf"(?<=[?&]){re.escape(name)}=[^&#]*")
    return pattern.sub(f"{name}={REDACTED}", str(url))


def userinfo_of(url: str) -> str | None:
    """The userinfo of `url` by the conservative rule: from `://` to the last `@`.

    None when `url` has no `@` after its `://`. Used by `connection_url` to refuse a
    URL whose password holds a character that ends the userinfo for other parsers.
    """
    head, userinfo, _ = _split_userinfo(str(url))
    return userinfo if head else None


def _split_userinfo(text: str) -> tuple[str, str | None, str]:
    """`(text up to and including '://', userinfo or None, the rest)`."""
    scheme_end = text.find("://")
    head_length = scheme_end + 3 if scheme_end >= 0 else 0
    head, body = text[:head_length], text[head_length:]
    userinfo, at, rest = body.rpartition("@")
    if not at:
        return head, None, body
    return head, userinfo, rest


def _malformed_user(user: str, head: str, text: str) -> bool:
    """Whether `user` holds what no user name can, so it may be part of a password.

    A `/` is such a character only where an authority was given: `sqlite:////a@b/x`
    is a path that happens to hold an `@`.
    """
    if any(character in user for character in "?#@"):
        return True
    return "/" in user and not text[len(head) :].startswith("/")


def _redact_key_values(text: str) -> str:
    """A libpq key=value string with secret values and stray words replaced by `***`."""
    shown: list[str] = []
    for token in _KEY_VALUE_TOKEN.finditer(text):
        pair = token.group("pair")
        shown.append(token.group("space") + (REDACTED if pair is None else _redact_pairs(pair)))
    return "".join(shown)


def _redact_pairs(text: str) -> str:
    return _SECRET_PAIR.sub(lambda match: f"{match['key']}{match['equals']}{REDACTED}", text)
