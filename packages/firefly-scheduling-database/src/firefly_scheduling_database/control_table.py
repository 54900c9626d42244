"""The control store's table: one row per record, keyed by `(kind, record_key)`.

Keys are the 64 hex digits of a record's identity (`control.records.record_key`),
so they fit any column and compare the same on every dialect; values are JSON text.
On MySQL/MariaDB every value travels as hex digits the server decodes and comes back
as its UTF-8 bytes (`mysql_text`), whatever the session's sql_mode and character set.
"""

from __future__ import annotations

import re
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Dialect

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling_database.mysql_text import HexBoundLongText, HexBoundText

DEFAULT_TABLE: Final = "firefly_scheduling_control"
_TABLE_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,47}")
_KIND_LENGTH: Final = 16
_KEY_LENGTH: Final = 64


class _AsciiKey(HexBoundText):
    """An ASCII key column (`ascii_bin` on MySQL/MariaDB), sent as hex digits there."""

    impl = sa.String(_KEY_LENGTH)
    cache_ok = True
    charset = "ascii"

    def load_dialect_impl(self, dialect: Dialect) -> sa.types.TypeEngine[Any]:
        length = self.impl.length if isinstance(self.impl, sa.String) else _KEY_LENGTH
        if dialect.name in {"mysql", "mariadb"}:
            return dialect.type_descriptor(
                mysql.VARCHAR(length, charset="ascii", collation="ascii_bin")
            )
        return dialect.type_descriptor(sa.String(length))


class _KindColumn(_AsciiKey):
    impl = sa.String(_KIND_LENGTH)
    cache_ok = True


def control_table(name: str = DEFAULT_TABLE) -> sa.Table:
    """The table `name`, checked to be a plain identifier (it is written into DDL)."""
    if not _TABLE_NAME.fullmatch(name):
        raise ConfigurationError(
            f"the control store's table name must be a letter or underscore followed by up "
            f"to 47 letters, digits or underscores, got {name!r}"
        )
    return sa.Table(
        name,
        sa.MetaData(),
        sa.Column("kind", _KindColumn(), primary_key=True),
        sa.Column("record_key", _AsciiKey(), primary_key=True),
        sa.Column("record_value", HexBoundLongText(), nullable=False),
    )
