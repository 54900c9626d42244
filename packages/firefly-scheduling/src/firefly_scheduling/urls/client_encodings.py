"""Whether a client character set can carry the SQL texts the adapters send.

Every statement an SQL adapter sends is ASCII: a value that is not (a lock name, a
task, an error text) goes outside the text (PostgreSQL, SQLite) or inside it as hex
digits (MySQL/MariaDB). So a client character set serves when the driver has a
codec for it and that codec writes and reads ASCII as ASCII; the multibyte sets
whose second bytes overlap ASCII (`gbk`, `big5`, `sjis`) do, since no byte of an
ASCII text starts a multibyte character. A set without such a codec is refused
when the lock or store is built, naming it, not on the first statement.
"""

from __future__ import annotations

import codecs
from typing import Final

#: Every printable ASCII character, which the statements are written in.
_PRINTABLE: Final = "".join(chr(code) for code in range(0x20, 0x7F))


def ascii_text_problem(encoding: str) -> str | None:
    """Why a driver encoding texts with Python's codec `encoding` cannot carry ASCII
    statements, or None when it can."""
    try:
        codecs.lookup(encoding)
    except LookupError:
        return f"Python has no codec {encoding!r} to write it with"
    try:
        written = _PRINTABLE.encode(encoding)
        read = _PRINTABLE.encode("ascii").decode(encoding)
    except UnicodeError:
        return f"its codec {encoding!r} cannot write ASCII"
    if written != _PRINTABLE.encode("ascii") or read != _PRINTABLE:
        return f"its codec {encoding!r} does not write ASCII as ASCII"
    return None
