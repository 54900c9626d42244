"""The guarded-write helpers cost nothing until used: no driver or framework is imported.

`import firefly_scheduling` and `import firefly_scheduling.fencing` must not import
SQLAlchemy, Django or redis; each helper's module is loaded the first time its name
is looked up, and then only its own library.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

LIBRARIES = ("sqlalchemy", "django", "redis")


def _imported_after(statements: str) -> list[str]:
    probe = (
        f"import json, sys\n{statements}\n"
        f"print(json.dumps([name for name in {LIBRARIES!r} if name in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    imported: list[str] = json.loads(done.stdout)
    return imported


def test_importing_the_package_and_fencing_imports_no_library() -> None:
    assert _imported_after("import firefly_scheduling\nimport firefly_scheduling.fencing") == []
    assert _imported_after("from firefly_scheduling.fencing import FencingTokenError") == []


def test_each_helper_loads_only_its_own_library() -> None:
    assert _imported_after("from firefly_scheduling.fencing import fenced_update") == ["sqlalchemy"]
    assert _imported_after("from firefly_scheduling.fencing import afenced_set") == ["redis"]


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    import firefly_scheduling.fencing as fencing  # noqa: PLC0415 - the lookup is the test

    with pytest.raises(AttributeError, match="fenced_delete"):
        fencing.fenced_delete  # noqa: B018 - the lookup is the test
