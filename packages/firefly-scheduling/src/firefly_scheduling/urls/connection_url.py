"""Check a backend URL up front, so a wrong or malformed URL fails at construction.

Every refusal names the provider and shows the URL redacted, never a parser's own
message: urllib's "Port could not be cast to integer value as 'Sup3rS3cret'" quotes
whatever it mistook for a port, and for `redis://user:Sup3rS3cret/x@host` that is
the password. The same goes for the exception chain, which a logger prints too:
errors are raised outside the `except` block that caught the parser's, so neither
`__cause__` nor `__context__` holds it.

A password must be percent-encoded where it holds a character that ends the
userinfo part of a URL (`/`, `?`, `#`, `@`) or a `%`: parsers split such a URL in
different places, and one of them would then hand part of the password to the
server as a host, a port or a path (and print it in its errors). Such a URL is
refused with a message that says so, found by the conservative rule of
`redaction`: everything between `://` and the last `@` is userinfo.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import SplitResult, parse_qsl, urlsplit

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.suggestions import nearest
from firefly_scheduling.urls.redaction import mask_option_value, redact_url, userinfo_of

_USERINFO_ENDERS = "/?#@"
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
ENCODING_HINT = (
    "percent-encode the special characters of the user name and password "
    "('/' as %2F, '?' as %3F, '#' as %23, '@' as %40, '%' as %25, ':' in a user name as %3A)"
)


def parse_lock_url(url: str, *, provider: str, schemes: Iterable[str]) -> SplitResult:
    """Split `url`, refusing a malformed URL or any scheme `provider` cannot use.

    The error names the provider and the scheme it got, with the URL redacted; a
    value with no `scheme://` at all is not shown, since nothing marks where a
    password in it would be.
    """
    allowed = tuple(schemes)
    expected = " or ".join(f"{scheme}://" for scheme in allowed)
    if not isinstance(url, str):
        raise ConfigurationError(
            f"the {provider} lock provider needs a URL string, got {type(url).__name__}"
        )
    text = url.strip()
    if not text:
        raise ConfigurationError(f"the {provider} lock provider needs a URL, got {url!r}")
    if "://" not in text:
        raise ConfigurationError(
            f"the {provider} lock provider needs a {expected} URL, got a scheme-less value "
            "(no 'scheme://'; not shown, as it may hold a password)"
        )
    problem = url_problem(text)
    if problem is not None:
        raise ConfigurationError(
            f"the {provider} lock provider cannot use the URL {redact_url(text)}: {problem}"
        )
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme not in allowed:
        raise ConfigurationError(
            f"the {provider} lock provider cannot use a {scheme or 'scheme-less'!r} URL "
            f"({redact_url(text)}); expected {expected}"
        )
    return parts


def url_options(query: str, *, provider: str, known: Iterable[str], shown: str) -> dict[str, str]:
    """The options of a lock URL's `query`, by name: each known, given once, not empty.

    An unknown option is refused rather than ignored (a misspelt `pool_sise=` would
    otherwise leave the default in force unnoticed). `shown` is the URL redacted.
    """
    allowed = tuple(known)
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise ConfigurationError(
            f"the {provider} lock provider cannot read the query of the URL ({shown})"
        ) from None
    options: dict[str, str] = {}
    for name, value in pairs:
        if name not in allowed:
            raise unknown_option(name, provider=provider, known=allowed, shown=shown)
        if name in options:
            raise ConfigurationError(
                f"the {provider} lock provider got the URL option {name!r} twice ({shown})"
            )
        if not value:
            raise ConfigurationError(
                f"the {provider} lock provider got an empty URL option {name!r} ({shown})"
            )
        options[name] = value
    return options


def unknown_option(
    name: str, *, provider: str, known: Iterable[str], shown: str, listed: bool = True
) -> ConfigurationError:
    """The refusal of the URL option `name`: it and the nearest known option, never a value.

    Every backend refuses an option it does not know this way, rather than ignoring it
    or letting its driver fail on the first fire. `shown` is the URL redacted; the
    option's value is masked in it too, as it may be a secret under a misspelt key
    (`passwrod=`). `listed=False` leaves out the list of known options.
    """
    allowed = list(known)
    match = nearest(name, allowed)
    guess = f" (did you mean {match!r}?)" if match is not None else ""
    listing = f"; known options: {', '.join(allowed)}" if listed and allowed else ""
    return ConfigurationError(
        f"the {provider} lock provider does not know the URL option {name!r}{guess} "
        f"in {mask_option_value(shown, name)}{listing}"
    )


def query_names(query: str) -> list[str]:
    """The option names of a URL's `query`, in order (values are not looked at)."""
    return [name for name, _ in parse_qsl(query, keep_blank_values=True)]


def url_problem(url: str) -> str | None:
    """Why `url` is malformed, in words that quote no part of it; None if it is fine."""
    parts = _split(url)
    if parts is None:
        return "it is not a well-formed URL (check the brackets around an IPv6 host)"
    conservative = userinfo_of(url)
    authority_given = not url.partition("://")[2].startswith("/")
    if conservative is not None and authority_given:
        netloc = parts.netloc
        parsed = netloc.rpartition("@")[0] if "@" in netloc else None
        if parsed != conservative or any(c in conservative for c in _USERINFO_ENDERS):
            return (
                "everything up to its last '@' is read as the user name and password, and "
                f"that part holds '/', '?', '#' or '@'; {ENCODING_HINT}"
            )
        if _BAD_PERCENT.search(conservative):
            return (
                f"the user name or password holds a '%' that starts no %XX escape; {ENCODING_HINT}"
            )
    if not _port_is_valid(parts):
        return "the port is not a whole number from 0 to 65535"
    return None


def _split(url: str) -> SplitResult | None:
    try:
        return urlsplit(url)
    except ValueError:
        return None


def _port_is_valid(parts: SplitResult) -> bool:
    try:
        _ = parts.port
    except ValueError:
        return False
    return True
