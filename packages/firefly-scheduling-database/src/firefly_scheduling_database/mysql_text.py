"""Names and texts sent to MySQL/MariaDB as hex digits, and text read back as its bytes.

A value a driver writes into the SQL text as a string literal is read by the
session's rules, which the driver may not share: under `NO_BACKSLASH_ESCAPES` a
backslash is an ordinary character, and under a multibyte client character set
(`gbk`, `big5`, `sjis`) the byte of a backslash can be read as the second byte of a
character. asyncmy escapes bytes with backslashes whatever the session says, so a
crafted name ended its literal early and ran as SQL. On MySQL and MariaDB every
name, task, node and error text this package binds therefore travels as the hex
digits of its UTF-8 bytes, decoded by the server (`UNHEX`): hex digits contain no
quote and no backslash, are single bytes every client character set reads as
themselves, and so no sql_mode or character set changes what they mean. Text
columns come back as the bytes of their UTF-8 form (`CAST(... AS BINARY)`), so a
client character set that cannot spell a character never narrows what is read.

Elsewhere (PostgreSQL, SQLite) values are bound outside the SQL text already, and
these types and elements render as the plain parameter and column.

A text of several statements (grouped releases and finishes) carries only values
`inert` in any SQL text: hex digits, owner tokens, numbers and instants
(`checked_inert`), so no value of it can end a literal under any session setting.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Final

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.visitors import InternalTraversal

#: The dialect names that get hex digits (SQLAlchemy's names for MySQL and MariaDB).
HEX_DIALECTS: Final = frozenset({"mysql", "mariadb"})
#: Characters no escaping rule and no ASCII-compatible character set reads otherwise:
#: no quote, no backslash, nothing outside ASCII (instants' text included).
_INERT: Final = re.compile(r"[0-9A-Za-z _:.+-]*")


def hex_text(value: str) -> str:
    """`value`'s UTF-8 bytes as upper-case hex digits, the form `HEX()` answers in."""
    return value.encode("utf-8").hex().upper()


def _hex_or_none(value: str | None) -> str | None:
    return None if value is None else hex_text(value)


def inert(value: object) -> bool:
    """Whether `value`, written into a SQL text by any driver, reads the same to any session."""
    if value is None or isinstance(value, bool | int | float):
        return True
    return isinstance(value, str) and _INERT.fullmatch(value) is not None


def checked_inert(values: Mapping[str, object] | Iterable[object]) -> None:
    """Refuse (ValueError) a value of `values` (a mapping's values, or each) not `inert`.

    For texts of several statements only: there a value that ended its literal would
    run statements of its own, so their values are checked, not trusted.
    """
    items = values.values() if isinstance(values, Mapping) else values
    for value in items:
        if not inert(value):
            raise ValueError(
                f"refusing to send {value!r} in a text of several statements: only hex "
                "digits, tokens, numbers and instants are sent there"
            )


class FromHex(ColumnElement[Any]):
    """`UNHEX(value)` on MySQL/MariaDB (binary columns), the value itself elsewhere."""

    inherit_cache = True
    # What SQLAlchemy's statement cache keys on, and clones.
    _traverse_internals = [  # noqa: RUF012 - SQLAlchemy types it as an instance attribute
        ("value", InternalTraversal.dp_clauseelement),
        ("type", InternalTraversal.dp_type),
    ]

    def __init__(self, value: ColumnElement[Any], type_: sa.types.TypeEngine[Any]) -> None:
        self.value = value
        self.type = type_


class TextFromHex(FromHex):
    """`CONVERT(UNHEX(value) USING cs) COLLATE cs_bin` on MySQL/MariaDB (text columns).

    The explicit binary collation compares exactly, and wins over any column's, so no
    comparison meets an "illegal mix of collations".
    """

    inherit_cache = True
    _traverse_internals = [  # noqa: RUF012 - SQLAlchemy types it as an instance attribute
        *FromHex._traverse_internals,
        ("charset", InternalTraversal.dp_string),
    ]

    def __init__(self, value: ColumnElement[Any], type_: HexBoundText) -> None:
        super().__init__(value, type_)
        self.charset = type_.charset


class Utf8Bytes(ColumnElement[Any]):
    """A text column as the bytes of its UTF-8 form on MySQL/MariaDB, the column elsewhere."""

    inherit_cache = True
    _traverse_internals = [  # noqa: RUF012 - SQLAlchemy types it as an instance attribute
        ("column", InternalTraversal.dp_clauseelement),
        ("type", InternalTraversal.dp_type),
    ]

    def __init__(self, column: ColumnElement[Any], type_: sa.types.TypeEngine[Any]) -> None:
        self.column = column
        self.type = type_


@compiles(FromHex)
@compiles(TextFromHex)
def _plain_value(element: FromHex, compiler: SQLCompiler, **kw: Any) -> str:
    return compiler.process(element.value, **kw)


@compiles(FromHex, "mysql")
@compiles(FromHex, "mariadb")
def _unhex(element: FromHex, compiler: SQLCompiler, **kw: Any) -> str:
    return f"UNHEX({compiler.process(element.value, **kw)})"


@compiles(TextFromHex, "mysql")
@compiles(TextFromHex, "mariadb")
def _text_from_hex(element: TextFromHex, compiler: SQLCompiler, **kw: Any) -> str:
    value = compiler.process(element.value, **kw)
    return f"CONVERT(UNHEX({value}) USING {element.charset}) COLLATE {element.charset}_bin"


@compiles(Utf8Bytes)
def _plain_column(element: Utf8Bytes, compiler: SQLCompiler, **kw: Any) -> str:
    return compiler.process(element.column, **kw)


@compiles(Utf8Bytes, "mysql")
@compiles(Utf8Bytes, "mariadb")
def _utf8_bytes(element: Utf8Bytes, compiler: SQLCompiler, **kw: Any) -> str:
    return f"CAST(CONVERT({compiler.process(element.column, **kw)} USING utf8mb4) AS BINARY)"


class HexBoundName(sa.types.TypeDecorator[str]):
    """A name in a binary column (VARBINARY on MySQL/MariaDB): sent as hex, `UNHEX`ed.

    On MySQL/MariaDB only; elsewhere it is its dialect type (`load_dialect_impl` of
    a subclass, or `impl`), bound and read as usual. A binary column comes back as
    its bytes, decoded here.
    """

    impl: sa.types.TypeEngine[Any] | type[sa.types.TypeEngine[Any]] = sa.String
    cache_ok = True

    def bind_expression(self, bindvalue: Any) -> ColumnElement[Any]:
        return FromHex(bindvalue, self)

    def bind_processor(self, dialect: Dialect) -> Callable[[Any], Any] | None:
        # The hex digits go as they are: the column type's own processing (VARBINARY's
        # conversion to bytes) is for the decoded value, which only the server sees.
        if dialect.name in HEX_DIALECTS:
            return _hex_or_none
        return super().bind_processor(dialect)

    def process_result_value(self, value: Any, dialect: Dialect) -> str | None:
        if isinstance(value, bytes | bytearray):
            return bytes(value).decode("utf-8")
        return None if value is None else str(value)


class HexBoundText(HexBoundName):
    """A text column: sent as hex and converted to `charset`, read back as UTF-8 bytes."""

    cache_ok = True
    #: The character set the server converts the decoded bytes to (a constant).
    charset: ClassVar[str] = "utf8mb4"

    def bind_expression(self, bindvalue: Any) -> ColumnElement[Any]:
        return TextFromHex(bindvalue, self)

    def column_expression(self, colexpr: Any) -> ColumnElement[Any]:
        return Utf8Bytes(colexpr, self)


class HexBoundLongText(HexBoundText):
    """TEXT, sent and read as `HexBoundText`."""

    impl = sa.Text
    cache_ok = True
