"""The workspace releases in lockstep: one version, pinned exactly everywhere.

The distributions are published together, and a sibling built against one core
must never be installed beside another, so every sibling pins the core with `==`,
the core's extras pin the siblings the same way, and each package's `__version__`
reads back its own distribution's metadata.
"""

from __future__ import annotations

import importlib
import re
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from packaging.requirements import Requirement

import firefly_scheduling
from firefly_scheduling.cli import main

REPOSITORY = Path(__file__).resolve().parents[3]
PACKAGES = sorted(path.parent for path in (REPOSITORY / "packages").glob("*/pyproject.toml"))
CORE = "firefly-scheduling"


def project_of(package: Path) -> dict[str, Any]:
    table: dict[str, Any] = tomllib.loads((package / "pyproject.toml").read_text())["project"]
    return table


PROJECTS = {project_of(package)["name"]: project_of(package) for package in PACKAGES}
SIBLINGS = sorted(name for name in PROJECTS if name != CORE)
WORKSPACE_VERSION = PROJECTS[CORE]["version"]


def test_the_workspace_holds_the_core_and_its_siblings() -> None:
    assert {
        "firefly-scheduling-database",
        "firefly-scheduling-memcached",
        "firefly-scheduling-mysql",
        "firefly-scheduling-postgres",
        "firefly-scheduling-redis",
    } <= set(SIBLINGS)
    assert all(name.startswith(f"{CORE}-") for name in SIBLINGS)
    assert re.fullmatch(r"\d+\.\d+\.\d+", WORKSPACE_VERSION)


@pytest.mark.parametrize("name", sorted(PROJECTS))
def test_every_distribution_has_the_workspace_version_and_its_package_agrees(name: str) -> None:
    assert PROJECTS[name]["version"] == WORKSPACE_VERSION
    module = importlib.import_module(name.replace("-", "_"))
    assert module.__version__ == version(name) == WORKSPACE_VERSION


@pytest.mark.parametrize("name", SIBLINGS)
def test_every_sibling_pins_the_core_to_the_workspace_version(name: str) -> None:
    requirements = [Requirement(text) for text in PROJECTS[name]["dependencies"]]
    core = [requirement for requirement in requirements if requirement.name == CORE]
    assert [str(requirement.specifier) for requirement in core] == [f"=={WORKSPACE_VERSION}"]


def test_every_extra_of_the_core_pins_the_siblings_to_the_workspace_version() -> None:
    extras: dict[str, list[str]] = PROJECTS[CORE]["optional-dependencies"]
    pinned: set[str] = set()
    for extra, texts in extras.items():
        for requirement in map(Requirement, texts):
            if requirement.name.startswith(f"{CORE}-"):
                assert str(requirement.specifier) == f"=={WORKSPACE_VERSION}", (extra, requirement)
                pinned.add(requirement.name)
    assert sorted(extras["all"]) == sorted(f"{name}=={WORKSPACE_VERSION}" for name in SIBLINGS)
    assert sorted(pinned) == SIBLINGS


@pytest.mark.parametrize("package", PACKAGES, ids=lambda package: package.name)
def test_every_distribution_ships_the_root_license_and_declares_it(package: Path) -> None:
    project = project_of(package)
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]
    # A copy, not a symlink: an sdist refuses a link that leaves its root.
    assert not (package / "LICENSE").is_symlink()
    assert (package / "LICENSE").read_text() == (REPOSITORY / "LICENSE").read_text()
    assert "Typing :: Typed" in project["classifiers"]
    assert (package / "src" / package.name.replace("-", "_") / "py.typed").is_file()


def test_version_prints_the_core_then_each_installed_sibling_with_its_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [f"{name} {version(name)}" for name in [CORE, *SIBLINGS]]
    assert result.output.splitlines()[0] == f"firefly-scheduling {firefly_scheduling.__version__}"


@pytest.mark.parametrize("package", PACKAGES, ids=lambda package: package.name)
def test_every_package_readme_reads_well_on_its_own(package: Path) -> None:
    """A README is the PyPI page: relative links and repository paths lead nowhere there."""
    text = (package / "README.md").read_text()
    targets = re.findall(r"\]\(([^)\s]+)", text)
    assert targets, "a README links to the project"
    assert all(target.startswith("https://") for target in targets), targets
    assert not re.search(r"`docs/\S+\.md`|DESIGN|§", text)
