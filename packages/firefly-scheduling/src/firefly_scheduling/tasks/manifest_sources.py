"""`source_fingerprint`: one digest of the source files of the scanned packages.

A compiled manifest records the fingerprint of the packages it was scanned from, so a
host can tell, at boot and without importing anything, that a package changed after
the manifest was compiled: a task added since would never run, and nothing else
would say so. Packages are found the way the import system would find them
(`importlib.machinery.PathFinder` on `sys.path`, which executes no module), then
every `.py` file below each is read, `__main__.py` scripts excepted as the scanner
skips them. The digest covers each file's path inside its package and its bytes, in
sorted order, so two nodes with the same code agree, wherever it is installed.

A change the scan would not see (a comment, a helper) changes the fingerprint too:
the manifest is then only *possibly* stale, which is how the hosts word it.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator, Sequence
from importlib.machinery import PathFinder
from pathlib import Path

#: The algorithm, written into the fingerprint so another one can follow.
ALGORITHM = "sha256"


def source_fingerprint(packages: Sequence[str]) -> str | None:
    """`sha256:<hex>` over the sources of `packages`; None if one cannot be found.

    None means "cannot tell" (a package found only as bytecode, or not on the path):
    the caller then checks nothing, rather than warning about every boot.
    """
    digest = hashlib.new(ALGORITHM)
    for package in sorted({name.strip() for name in packages if name.strip()}):
        files = _source_files(package)
        if files is None:
            return None
        for relative, path in files:
            digest.update(f"{package}/{relative}\0".encode())
            try:
                digest.update(path.read_bytes())
            except OSError:
                return None
            digest.update(b"\0")
    return f"{ALGORITHM}:{digest.hexdigest()}"


def _source_files(name: str) -> list[tuple[str, Path]] | None:
    """Every source file of the module or package `name`, by its path inside it."""
    first, *rest = name.split(".")
    spec = PathFinder.find_spec(first, sys.path)
    if spec is None:
        return None
    roots = [Path(location) for location in spec.submodule_search_locations or ()]
    module = Path(spec.origin) if spec.origin and not roots else None
    for part in rest:
        if module is not None:
            return None  # a module has no submodules
        found_roots = [root / part for root in roots if (root / part).is_dir()]
        found_modules = [root / f"{part}.py" for root in roots if (root / f"{part}.py").is_file()]
        roots, module = (
            found_roots,
            (found_modules[0] if found_modules and not found_roots else None),
        )
        if not roots and module is None:
            return None
    if module is not None:
        return [(module.name, module)] if module.suffix == ".py" else None
    return sorted(_below(roots))


def _below(roots: list[Path]) -> Iterator[tuple[str, Path]]:
    for root in roots:
        for path in root.rglob("*.py"):
            if path.name != "__main__.py" and "__pycache__" not in path.parts:
                yield path.relative_to(root).as_posix(), path
