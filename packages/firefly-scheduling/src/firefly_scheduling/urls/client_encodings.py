"""Whether a client character set can carry what the SQL adapters send.

Every statement an SQL adapter writes is ASCII: a value that is not (a lock name, a
task, an error text) goes outside the text (PostgreSQL, SQLite) or inside it as hex
digits (MySQL/MariaDB). So a MySQL client character set serves when the driver has a
codec for it and that codec writes and reads ASCII as ASCII (`ascii_text_problem`);
the multibyte sets whose second bytes overlap ASCII (`gbk`, `big5`, `sjis`) do, since
no byte of an ASCII text starts a multibyte character.

Values bound outside the text travel in the client encoding, though, so a libpq
connection must use UTF-8, the one encoding that carries every valid name
(`libpq_encoding_problem`): the adapters ask for it, and refuse a connection string
that asks for another. Either refusal happens when the lock or store is built,
naming the setting, not on the first statement.
"""

from __future__ import annotations

import codecs
import re
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


#: PostgreSQL's names for UTF-8 (compared without case).
LIBPQ_UTF8: Final = "UTF8"
_UTF8_NAMES: Final = frozenset({"utf8", "utf-8", "unicode"})
#: `-c client_encoding=...` or `--client-encoding=...` in libpq's `options`.
_OPTION: Final = re.compile(r"(?:-c\s*|--)client[_-]encoding=(\S+)", re.IGNORECASE)


def libpq_encoding_problem(parameter: str | None, options: str | None) -> str | None:
    """Why a libpq connection with `client_encoding=parameter` and `options` would not
    talk UTF-8, naming the setting, or None when it does (or leaves it to the caller)."""
    if parameter is not None and parameter.strip().lower() not in _UTF8_NAMES:
        return f"client_encoding={parameter} cannot carry every lock name; use UTF8"
    for given in _OPTION.findall(options or ""):
        if given.strip("'\"").lower() not in _UTF8_NAMES:
            return (
                f"options sets client_encoding={given}, which cannot carry every lock name; "
                "use UTF8"
            )
    return None
