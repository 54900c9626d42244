"""Check a backend URL's kind up front, so a wrong URL fails at construction."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import SplitResult, urlsplit

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.locks.redaction import redact_url


def parse_lock_url(url: str, *, provider: str, schemes: Iterable[str]) -> SplitResult:
    """Split `url`, refusing any scheme `provider` cannot use.

    The error names the provider and the scheme it got, with the URL redacted.
    """
    allowed = tuple(schemes)
    if not isinstance(url, str) or not url.strip():
        raise ConfigurationError(f"the {provider} lock provider needs a URL, got {url!r}")
    try:
        parts = urlsplit(url.strip())
        _ = parts.port
    except ValueError as err:
        raise ConfigurationError(
            f"the {provider} lock provider got a malformed URL {redact_url(url)!r}: {err}"
        ) from None
    scheme = parts.scheme.lower()
    if scheme not in allowed:
        raise ConfigurationError(
            f"the {provider} lock provider cannot use a {scheme or 'scheme-less'!r} URL "
            f"({redact_url(url)}); expected {' or '.join(s + '://' for s in allowed)}"
        )
    return parts
