"""Core names no first-party backend outside the one table of install hints.

Everything core knows about a backend comes from the descriptor its distribution
registers; `providers/install_hints.py` (what to install when it is missing) is the
only exception. This scans core's code, identifiers and string literals (messages
included), and fails on any backend name elsewhere. Docstrings and comments may name
backends (they explain), and so may the shipped test plugin (`testing/`), which
exercises them, and the guarded writes (`fencing/`), which write to the
application's own SQL tables and Redis keys, not to a lock backend, and import those
clients only when one of their helpers is first used.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import firefly_scheduling
from firefly_scheduling.providers.install_hints import KNOWN_PROVIDERS

CORE = Path(firefly_scheduling.__file__).parent
ALLOWED = {CORE / "providers" / "install_hints.py"}
ALLOWED_DIRECTORIES = {CORE / "testing", CORE / "fencing"}

#: The table's names and schemes, plus the drivers the adapters wrap.
BACKEND_WORDS = frozenset(
    set(KNOWN_PROVIDERS)
    | {scheme for hint in KNOWN_PROVIDERS.values() for scheme in hint.store_schemes}
    | {"psycopg", "pymysql", "mariadb", "sqlalchemy", "pymemcache", "etcd3gw", "etcds"}
)
_WORD = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(_CAMEL.sub("_", text).lower()))


def _docstrings(tree: ast.AST) -> set[int]:
    """`id`s of the string constants that are docstrings."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def backend_names_in(source: str) -> Iterator[tuple[int, str, str]]:
    """`(line, what, text)` for each identifier or string literal naming a backend."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    for node in ast.walk(tree):
        texts: list[tuple[str, str]] = []
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings:
                texts.append(("string", node.value))
        elif isinstance(node, ast.Name):
            texts.append(("identifier", node.id))
        elif isinstance(node, ast.Attribute):
            texts.append(("identifier", node.attr))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            texts.append(("identifier", node.name))
        elif isinstance(node, ast.arg):
            texts.append(("identifier", node.arg))
        elif isinstance(node, ast.alias):
            texts.append(("identifier", node.asname or node.name))
        elif isinstance(node, ast.keyword) and node.arg:
            texts.append(("identifier", node.arg))
        for what, text in texts:
            if _words(text) & BACKEND_WORDS:
                yield getattr(node, "lineno", 0), what, text


def _core_modules() -> Iterator[Path]:
    for path in sorted(CORE.rglob("*.py")):
        if path in ALLOWED or any(d in path.parents for d in ALLOWED_DIRECTORIES):
            continue
        yield path


def test_core_code_names_no_backend_outside_the_install_hints() -> None:
    found = [
        f"{path.relative_to(CORE)}:{line}: {what} {text!r}"
        for path in _core_modules()
        for line, what, text in backend_names_in(path.read_text())
    ]
    assert not found, "backend names in core:\n" + "\n".join(found)


def test_the_scan_sees_identifiers_strings_and_messages_but_not_docstrings() -> None:
    sample = (
        '"""The redis docstring may name it."""\n'
        "# so may a comment: postgres\n"
        "def connect(mysql_url: str) -> None:\n"
        '    """Neither is flagged: memcached."""\n'
        '    raise ValueError(f"use a shared store: {mysql_url} or etcd://")\n'
        "PgAdvisoryName = SQLAlchemyThing\n"
    )
    flagged = {text for _, _, text in backend_names_in(sample)}
    assert flagged == {"mysql_url", " or etcd://", "SQLAlchemyThing"}


def test_the_scan_covers_the_table() -> None:
    assert {"postgres", "mysql", "database", "redis", "memcached", "etcd"} <= BACKEND_WORDS
    assert ALLOWED
    assert all(path.exists() for path in ALLOWED)
