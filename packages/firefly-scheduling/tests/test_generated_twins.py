"""The synchronous twins of the asyncio sources are committed up to date.

`tools/async_to_sync.py` generates them; a twin edited by hand, or a source edited
without regenerating, fails here with the command to run.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("async_to_sync", ROOT / "tools/async_to_sync.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["async_to_sync"] = module
    spec.loader.exec_module(module)
    return module


def test_every_twin_is_generated_from_its_current_source() -> None:
    assert generator().stale_twins() == [], "run: python tools/async_to_sync.py"


def test_the_transformation_drops_async_keeps_sync_branches_and_renames() -> None:
    source = '''"""`AsyncBaseLock` for `async with`."""
import asyncio  # sync: import threading
from firefly_scheduling.concurrency.flavour import ASYNC  # sync: drop


class AsyncThing(AsyncBaseLock):
    async def aclose(self) -> None:
        if ASYNC:
            await asyncio.sleep(0)
        else:
            print("sync only", threading.get_ident())
        async with self._mutex:
            await self._close()
'''
    twin = generator().transform(source, source_path="x/src/firefly_scheduling/locks/x_async.py")
    header, _, body = twin.partition('"""')
    assert header.startswith("# Generated from x_async.py")
    twin = '"""' + body
    assert "async" not in twin
    assert "await" not in twin
    assert "import threading" in twin
    assert "ASYNC" not in twin
    assert 'print("sync only", threading.get_ident())' in twin
    assert "asyncio" not in twin
    assert "class AsyncThing(BaseLock):" in twin
    assert "def close(self) -> None:" in twin
    assert '"""`BaseLock` for `with`."""' in twin


def test_a_source_declares_its_own_renames() -> None:
    source = '''"""`AsyncFooLock` over `foo.aio`."""
# async-to-sync: rename AsyncFooLock FooLock
# async-to-sync: rename foo.aio.Client foo.Client

import foo.aio


class AsyncFooLock:
    async def aclose(self) -> None:
        await foo.aio.Client().aclose()
'''
    module = generator()
    own, _ = module.file_directives(source)
    assert own == {"AsyncFooLock": "FooLock", "foo.aio.Client": "foo.Client"}
    twin = module.transform(source, source_path="x/src/foo_pkg/lock_async.py")
    assert "async-to-sync" not in twin
    assert "class FooLock:" in twin
    assert "foo.Client().close()" in twin
    assert "AsyncFooLock" not in twin


def test_every_source_has_its_twin_beside_it_by_name_alone() -> None:
    module = generator()
    twins = module.all_twins()
    etcd = "packages/firefly-scheduling-etcd/src/firefly_scheduling_etcd/"
    assert twins[etcd + "lock_async.py"] == etcd + "lock.py"
    core = "packages/firefly-scheduling/src/firefly_scheduling/"
    assert twins[core + "locks/base_async.py"] == core + "locks/base.py"
    for source, twin in twins.items():
        assert source.endswith("_async.py")
        assert twin == source.removesuffix("_async.py") + ".py"
    base = "firefly_scheduling.locks.base"
    assert module.modules()[base + "_async"] == base


def test_no_hand_written_module_looks_like_a_source_or_an_old_twin() -> None:
    """`aio_X.py` was the old rule's name for a source; hand-written asyncio is `asyncio_X.py`."""
    names = [path.name for path in ROOT.glob("packages/*/src/**/*.py")]
    assert not [name for name in names if name.startswith("aio_")]


def test_every_twin_is_marked_generated_in_gitattributes() -> None:
    attributes = (ROOT / ".gitattributes").read_text()
    for twin in generator().all_twins().values():
        assert f"{twin} linguist-generated=true" in attributes
