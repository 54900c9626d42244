"""A backend generated from the template is a working sibling that passes the contracts.

`tools/new_backend.py` renders `templates/backend/` into a throwaway directory; the
result is linted and type-checked with the repository's settings, built into a
wheel and installed into a directory of its own (a real distribution: its entry
point is read from its metadata), and its own tests run in a fresh interpreter:
its URL and protocol tests, core's provider contract, and core's lock contract on
both flavours (`firefly_scheduling.testing`). Any of these failing fails here, so a
broken template cannot pass CI. The generator's refusals are checked too.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
import zipfile
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

#: Long, with no timing of its own: it builds the generated backend's wheel and runs
#: its suites in a nested pytest.
pytestmark = pytest.mark.early

ROOT = Path(__file__).resolve().parents[1]
GENERATOR = ROOT / "tools" / "new_backend.py"
NAME = "sample"
PACKAGE = f"firefly_scheduling_{NAME}"
DISTRIBUTION = f"firefly-scheduling-{NAME}"

#: Every file a new backend brings, as the guide lists them.
EXPECTED_FILES = {
    f"packages/{DISTRIBUTION}/LICENSE",
    f"packages/{DISTRIBUTION}/README.md",
    f"packages/{DISTRIBUTION}/pyproject.toml",
    *(
        f"packages/{DISTRIBUTION}/src/{PACKAGE}/{module}"
        for module in (
            "__init__.py",
            "version.py",
            "provider.py",
            "url.py",
            "protocol.py",
            "lock_async.py",
            "lock.py",
            "py.typed",
        )
    ),
    f"packages/{DISTRIBUTION}/tests/test_{NAME}_url.py",
    f"packages/{DISTRIBUTION}/tests/test_{NAME}_protocol.py",
    f"packages/{DISTRIBUTION}/tests/test_{NAME}_provider_contract.py",
    f"tests-integration/contract/test_{NAME}_contract.py",
    f"docs/backends/{NAME}.md",
}


def _run(
    command: list[str], *, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, capture_output=True, text=True, timeout=600, check=False, cwd=cwd, env=env
    )


def _uv() -> str:
    found = shutil.which("uv")
    if found is None:
        pytest.fail("uv is needed to build the generated backend (scripts/bootstrap installs it)")
    return found


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("new_backend", GENERATOR)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("template")
    done = _run([sys.executable, str(GENERATOR), NAME, "--root", str(root)], cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return root


def test_the_generator_writes_a_sibling_of_the_adapters_shape(generated: Path) -> None:
    written = {path.relative_to(generated).as_posix() for path in generated.rglob("*")}
    assert {path for path in written if (generated / path).is_file()} == EXPECTED_FILES
    text = "".join(path.read_text() for path in generated.rglob("*") if path.is_file())
    assert "{{" not in text, "a placeholder was left unfilled"
    twin = generated / f"packages/{DISTRIBUTION}/src/{PACKAGE}/lock.py"
    assert twin.read_text().startswith("# Generated from lock_async.py by tools/async_to_sync.py")
    assert "async " not in twin.read_text()
    assert "class SampleLock(BaseLock):" in twin.read_text()


def test_the_generated_code_is_lint_clean_and_strictly_typed(generated: Path) -> None:
    settings = [
        "--config",
        str(ROOT / "pyproject.toml"),
        "--config",
        f"lint.isort.known-first-party = ['firefly_scheduling', '{PACKAGE}']",
    ]
    paths = ["packages", "tests-integration"]
    lint = _run([sys.executable, "-m", "ruff", "check", *settings, *paths], cwd=generated)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    layout = _run(
        [sys.executable, "-m", "ruff", "format", "--check", *settings, *paths], cwd=generated
    )
    assert layout.returncode == 0, layout.stdout + layout.stderr
    typed = _run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--cache-dir",
            str(generated / ".mypy_cache"),
            f"packages/{DISTRIBUTION}/src/{PACKAGE}",
            f"packages/{DISTRIBUTION}/tests",
            "tests-integration/contract",
        ],
        cwd=generated,
    )
    assert typed.returncode == 0, typed.stdout + typed.stderr


def test_the_installed_backend_passes_its_tests_and_both_contracts(
    generated: Path, tmp_path: Path
) -> None:
    dist = tmp_path / "dist"
    built = _run(
        [_uv(), "build", "--wheel", "--out-dir", str(dist), f"packages/{DISTRIBUTION}"],
        cwd=generated,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = dist.glob(f"{PACKAGE}-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = next(name for name in names if name.endswith(".dist-info/entry_points.txt"))
        assert f"{NAME} = {PACKAGE}.provider:PROVIDER" in archive.read(metadata).decode()
    assert f"{PACKAGE}/lock.py" in names
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    site = tmp_path / "site"
    installed = _run(
        [_uv(), "pip", "install", "--no-deps", "--target", str(site), str(wheel)],
        cwd=generated,
        env={**os.environ, "UV_PYTHON": sys.executable},
    )
    assert installed.returncode == 0, installed.stderr
    assert (site / PACKAGE / "py.typed").exists()

    report = tmp_path / "report.xml"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *sys.path])}
    tests = [f"packages/{DISTRIBUTION}/tests", "tests-integration/contract"]
    checks = _run(
        [
            sys.executable,
            "-m",
            "pytest",
            *tests,
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(generated),
            "--junitxml",
            str(report),
        ],
        cwd=generated,
        env=env,
    )
    assert checks.returncode == 0, checks.stdout[-4000:] + checks.stderr[-2000:]
    passed: Counter[str] = Counter()
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        if not any(child.tag in {"failure", "error", "skipped"} for child in case):
            passed[case.get("classname", "").rpartition(".")[2]] += 1
    # Each contract ran in full (a class that was not collected would pass silently).
    assert passed["TestSampleLockContract"] >= 30, passed
    assert passed["TestAsyncSampleLockContract"] >= 30, passed
    assert passed["TestSampleProvider"] >= 8, passed


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("Acme", "lower-case"),
        ("a", "2 to 30"),
        ("acme-lock", "lower-case letters and digits"),
        ("9lives", "starting with a letter"),
        ("redis", "existing provider"),
        ("memory", "existing provider"),
    ],
)
def test_a_name_that_cannot_be_a_provider_is_refused(name: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        _generator().placeholders(name, class_prefix=None, title=None)


def test_a_bad_class_prefix_is_refused() -> None:
    with pytest.raises(ValueError, match="class prefix"):
        _generator().placeholders("acme", class_prefix="acme_", title=None)


def test_an_unknown_placeholder_names_the_template_file() -> None:
    generator = _generator()
    with pytest.raises(generator.TemplateError, match=r"x\.tmpl: unknown placeholder \{\{nmae\}\}"):
        generator.render("import {{nmae}}", {"name": "acme"}, where="x.tmpl")


def test_nothing_is_overwritten(generated: Path) -> None:
    again = _run([sys.executable, str(GENERATOR), NAME, "--root", str(generated)], cwd=ROOT)
    assert again.returncode == 2
    assert "refusing to overwrite" in again.stderr
