"""`nearest`: the known word a mistyped one most likely meant, for "did you mean" hints.

One rule for every such hint (an environment variable, a URL option, a Django
settings key), so that they agree on what counts as close.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

#: How alike two words must be (difflib's ratio) for one to be offered for the other.
#: High enough that an unrelated word gets no suggestion rather than a wrong one.
CUTOFF = 0.75


def nearest(word: str, known: Iterable[str]) -> str | None:
    """The word of `known` closest to `word`, compared case-insensitively; None if none is close."""
    by_folded = {candidate.casefold(): candidate for candidate in known}
    matches = difflib.get_close_matches(word.casefold(), list(by_folded), n=1, cutoff=CUTOFF)
    return by_folded[matches[0]] if matches else None


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`; did you mean 'x'?` for the nearest known word, or ''."""
    match = nearest(word, known)
    return f"; did you mean {match!r}?" if match is not None else ""
