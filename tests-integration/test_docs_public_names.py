"""Every name the README and the docs import from the project still imports.

A page's code is what a user copies: a name moved or renamed without its docs breaks
that user first. Each `from firefly_scheduling... import ...` and
`import firefly_scheduling...` line of the README and `docs/` (code blocks and inline
code alike) is imported here, name by name.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
#: `from firefly_scheduling[_x].y import a, b as c` on one line, or opening a `(` list.
FROM_IMPORT = re.compile(r"^\s*from\s+(firefly_scheduling[\w.]*)\s+import\s+(.+)$")
PLAIN_IMPORT = re.compile(r"^\s*import\s+(firefly_scheduling[\w.]*)\s*$")
#: A results page quotes commands, not code a user copies.
SKIPPED_FOLDERS = {"results"}


def imported_names() -> list[tuple[str, str, str]]:
    """(page, module, name) for each name the pages import; name "" for a module."""
    found: list[tuple[str, str, str]] = []
    for page in PAGES:
        if SKIPPED_FOLDERS.intersection(page.relative_to(ROOT).parts):
            continue
        lines = page.read_text(encoding="utf-8").splitlines()
        where = str(page.relative_to(ROOT))
        for index, raw in enumerate(lines):
            line = raw.strip().strip("`")
            if plain := PLAIN_IMPORT.match(line):
                found.append((where, plain.group(1), ""))
                continue
            match = FROM_IMPORT.match(line)
            if match is None:
                continue
            module, names = match.group(1), match.group(2)
            if names.strip().startswith("("):
                names = names.strip()[1:]
                following = iter(lines[index + 1 :])
                while ")" not in names:
                    names += " " + next(following)
                names = names.split(")")[0]
            for spelt in names.split(","):
                name = spelt.split(" as ")[0].strip().strip("`")
                if name and name != "*" and not name.startswith("#"):
                    found.append((where, module, name))
    return found


NAMES = imported_names()


def test_the_pages_import_names_of_the_project() -> None:
    # The scan reads the pages at all: a broken pattern would pass every case below.
    assert len(NAMES) >= 40, NAMES
    assert any(module == "firefly_scheduling" and name == "scheduled" for _, module, name in NAMES)


@pytest.mark.parametrize(("page", "module", "name"), NAMES)
def test_a_documented_name_imports(page: str, module: str, name: str) -> None:
    imported = importlib.import_module(module)
    if name:
        assert hasattr(imported, name) or _submodule(module, name), (
            f"{page}: `from {module} import {name}` fails"
        )


def _submodule(module: str, name: str) -> bool:
    try:
        importlib.import_module(f"{module}.{name}")
    except ModuleNotFoundError:
        return False
    return True
