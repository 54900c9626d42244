"""The installed `flock` example provider against core's shipped contract suites.

Run by `tests-integration/test_out_of_tree_provider.py` with the built wheel on the
import path; not named `test_*.py` so the ordinary run, where the example is not
installed, does not collect it.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import ClassVar

import firefly_flock
import pytest
from firefly_flock import FlockAnchorStore, FlockLock

from firefly_scheduling import Settings
from firefly_scheduling.initial_delay.selection import resolve_anchor_store, shared_anchor_stores
from firefly_scheduling.testing import LockContract, ProviderContract

MARKER = "flock-urls-carry-no-password"


@pytest.fixture
def flock_url(tmp_path: Path) -> str:
    return f"flock://{tmp_path / 'leases'}"


def test_the_provider_comes_from_the_installed_wheel_not_the_source_tree() -> None:
    distribution = importlib.metadata.distribution("firefly-flock-example")
    entry_points = {ep.name: ep.value for ep in distribution.entry_points}
    assert entry_points == {"flock": "firefly_flock.provider:PROVIDER"}
    assert "src" not in Path(firefly_flock.__file__).parts


class TestFlockLockContract(LockContract):
    @pytest.fixture
    def lock_factory(self, flock_url: str) -> partial[FlockLock]:
        return partial(FlockLock, flock_url)

    @pytest.fixture
    def unreachable_lock(self, tmp_path: Path) -> tuple[FlockLock, str]:
        lock = FlockLock(f"flock://{tmp_path / 'gone'}")
        (tmp_path / "gone").rmdir()
        (tmp_path / "gone").write_text("a file where the directory was")
        return lock, MARKER


class TestFlockProvider(ProviderContract):
    provider = "flock"
    lock_class = FlockLock
    capabilities: ClassVar[dict[str, object]] = {
        "ttl_honoured": True,
        "session_scoped": False,
        "renewable": True,
    }
    wrong_kind_urls = (("redis://u:s3cr3t-pw@127.0.0.1:6379/0", "redis"),)

    @pytest.fixture
    def configured_url(self, flock_url: str) -> tuple[str, str]:
        return flock_url, f"FlockLock({flock_url!r})"


@pytest.fixture
def flock_settings(flock_url: str) -> Settings:
    return Settings.from_env(
        {
            "FIREFLY_SCHEDULING_LOCK_PROVIDER": "flock",
            "FIREFLY_SCHEDULING_LOCK_FLOCK_URL": flock_url,
        }
    )


@pytest.fixture
def stores(flock_settings: Settings) -> Iterator[tuple[FlockAnchorStore, FlockAnchorStore]]:
    first, second = resolve_anchor_store(flock_settings), resolve_anchor_store(flock_settings)
    assert isinstance(first, FlockAnchorStore)
    assert isinstance(second, FlockAnchorStore)
    yield first, second
    first.close()
    second.close()


def test_core_keeps_the_anchors_in_the_providers_own_store_by_default(
    stores: tuple[FlockAnchorStore, FlockAnchorStore],
) -> None:
    first, second = stores
    assert first.shared_across_processes
    assert first.add("app:job", "anchor-1")
    assert not second.add("app:job", "anchor-2")
    assert second.get("app:job") == "anchor-1"
    assert not first.replace("app:job", "anchor-2", "anchor-3")
    assert second.replace("app:job", "anchor-1", "anchor-3")
    assert first.get("app:job") == "anchor-3"


def test_core_messages_name_the_installed_provider() -> None:
    advice = shared_anchor_stores()
    assert "flock://" in advice
    assert "flock" in advice.rpartition("keeps them:")[2]
