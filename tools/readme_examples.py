"""Copy the README's examples into a directory, as a user would, and drive them there.

    python tools/readme_examples.py README.md DIR

Writes, from the README itself (so the check cannot drift from what readers see):

* `DIR/myapp/tasks.py`: the block that starts with `# myapp/tasks.py`, plus an
  empty `DIR/myapp/__init__.py`;
* `DIR/plain_lock.py`: the block that takes a plain lock (`hold(resolve_lock()`);
* `DIR/run_tasks.py`: a driver that imports `myapp.tasks` and calls the body of
  every `@scheduled` task in it once (awaiting an `async def` one, building the
  class of a method), so a name the example uses but never defines fails there.

It refuses (exit 1) a README whose examples import a module that is neither the
standard library nor `firefly_scheduling`: such an import would need its own line
in the install instructions. `scripts/check-wheels` runs the three files with the
interpreter of a virtualenv that holds only the built wheels.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
_TASKS_MARKER = "# myapp/tasks.py"
_PLAIN_LOCK_MARKER = "hold(resolve_lock()"

_DRIVER = '''\
"""Call every @scheduled task of myapp.tasks once, as the README wrote it."""

import asyncio
import inspect

import myapp.tasks
from firefly_scheduling.tasks.decorator import descriptor_of

called = 0
for name, value in vars(myapp.tasks).items():
    members = [(value, None)]
    if inspect.isclass(value) and value.__module__ == "myapp.tasks":
        members = [(member, value) for member in vars(value).values()]
    for function, owner in members:
        if descriptor_of(function) is None:
            continue
        bound = getattr(owner(), function.__name__) if owner is not None else function
        result = bound()
        if inspect.iscoroutine(result):
            asyncio.run(result)
        called += 1
        print("ran", descriptor_of(function).target)
if called == 0:
    raise SystemExit("the README example has no @scheduled task")
'''


def blocks(readme: str) -> tuple[str, str]:
    """The tasks example and the plain-lock example of `readme`."""
    found = _BLOCK.findall(readme)
    tasks = [block for block in found if block.startswith(_TASKS_MARKER)]
    plain = [block for block in found if _PLAIN_LOCK_MARKER in block]
    if len(tasks) != 1 or len(plain) != 1:
        raise SystemExit(
            f"README: expected one `{_TASKS_MARKER}` block and one plain-lock block, "
            f"found {len(tasks)} and {len(plain)}"
        )
    return tasks[0], plain[0]


def foreign_imports(source: str) -> list[str]:
    """Top-level modules `source` imports that are neither stdlib nor firefly's."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    allowed = set(sys.stdlib_module_names) | {"__future__"}
    return sorted(n for n in names if n not in allowed and not n.startswith("firefly_scheduling"))


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python tools/readme_examples.py README.md DIR", file=sys.stderr)
        return 2
    readme, target = Path(argv[0]), Path(argv[1])
    tasks, plain = blocks(readme.read_text(encoding="utf-8"))
    foreign = foreign_imports(tasks + plain)
    if foreign:
        print(
            f"README examples import {', '.join(foreign)}: name them in the install line "
            "and in this check, or use the standard library",
            file=sys.stderr,
        )
        return 1
    package = target / "myapp"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "tasks.py").write_text(tasks, encoding="utf-8")
    (target / "plain_lock.py").write_text(plain, encoding="utf-8")
    (target / "run_tasks.py").write_text(_DRIVER, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
