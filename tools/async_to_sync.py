"""Generate the synchronous twin of an asyncio module: write the code once, async.

psycopg 3's way (its `tools/async_to_sync.py`): the asyncio module is the source, and
its synchronous twin is generated from it, so the two never drift and nobody
maintains a copy by hand. The twin is committed (readers, type checkers and
coverage see real code), starts with a "generated, do not edit" header, and a test
regenerates every twin in memory and fails when a committed one is stale:

    python tools/async_to_sync.py            # rewrite every twin
    python tools/async_to_sync.py --check    # exit 1 and name the stale twins

The transformation, in order:

1. `if ASYNC:` blocks keep only their `else:` branch (dedented), or vanish when
   they have none. `ASYNC` is `firefly_scheduling.concurrency.flavour.ASYNC`, always True
   in the source (mypy is told so with `always_true`).
2. A line ending in `# sync: <code>` becomes `<code>` at the same indentation;
   `# sync: drop` removes the line.
3. `async` before `def`/`with`/`for` and every `await` disappear.
4. Names and dotted names are renamed through `NAMES` (code, strings and comments
   alike, on whole words), the modules of every pair likewise; strings and comments lose
   their `async`/`await` words too (docstring examples).
5. The result is formatted with ruff, like every file of the repository.

One naming rule finds every pair: an asyncio source is named `X_async.py`, and its
twin `X.py` is generated beside it (`locks/base_async.py` -> `locks/base.py`). A
hand-written module that is asyncio only, and so has no twin, is named `asyncio_X.py`
and is never mistaken for a source. The modules of every pair are renamed in both
directions of an import (`...base_async` -> `...base`) without a table. Each twin is
marked generated in `.gitattributes` (`linguist-generated`), in a block this tool
writes and `--check` checks.

A source names its own class renames, so no central table grows with every backend:

    # async-to-sync: rename AsyncRedisLock RedisLock

Every `rename` (a name or dotted name) applies to that source on top of the shared
`NAMES` below; the directive lines themselves are not copied into the twin.
"""

from __future__ import annotations

import argparse
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = "packages/firefly-scheduling/src/firefly_scheduling"

#: Where asyncio sources are found; each `X_async.py` generates `X.py` beside it.
SOURCE_GLOB = "packages/*/src/**/*_async.py"
SOURCE_SUFFIX = "_async.py"
GITATTRIBUTES = ROOT / ".gitattributes"
_ATTRIBUTES_BEGIN = "# generated twins (tools/async_to_sync.py): begin\n"
_ATTRIBUTES_END = "# generated twins (tools/async_to_sync.py): end\n"

#: Names of the asyncio flavour -> their synchronous twins (whole words only).
NAMES: dict[str, str] = {
    "AsyncBaseLock": "BaseLock",
    "AsyncSessionLock": "SessionLock",
    "AsyncReplyDeadline": "ReplyDeadline",
    "AsyncDistributedLock": "DistributedLock",
    "AsyncHoldingLock": "HoldingLock",
    "AsyncClaimingLock": "ClaimingLock",
    "AsyncBatchAcquiringLock": "BatchAcquiringLock",
    "AsyncBatchClaimingLock": "BatchClaimingLock",
    "AsyncFencedLock": "FencedLock",
    "AsyncRenewableLock": "RenewableLock",
    "AsyncPortOnlyHoldings": "PortOnlyHoldings",
    "AsyncInMemoryLock": "InMemoryLock",
    "AsyncLockContract": "LockContract",
    "AsyncHostileNamesContract": "HostileNamesContract",
    "AsyncLockFactory": "LockFactory",
    "AsyncNodes": "Nodes",
    "async_holding_lock": "holding_lock",
    "async_claiming_lock": "claiming_lock",
    "AsyncIterator": "Iterator",
    "AsyncGenerator": "Generator",
    "AbstractAsyncContextManager": "AbstractContextManager",
    "asynccontextmanager": "contextmanager",
    "ahold": "hold",
    "aclose": "close",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "asyncio.Lock": "threading.Lock",
    "asyncio.sleep": "time.sleep",
}

_HEADER = (
    "# Generated from {source} by tools/async_to_sync.py: do not edit.\n"
    "# Edit the asyncio source and run `python tools/async_to_sync.py`.\n"
)
_IF_ASYNC = re.compile(r"^(\s*)if ASYNC:\s*(#.*)?$")
_SYNC_DIRECTIVE = re.compile(r"^(\s*)(.*?)\s*# sync: (.*)$")
_FILE_DIRECTIVE = re.compile(r"^# async-to-sync: (rename) (.+?)(?:  # noqa: E501)?$")
#: `async with`/`async for`/`async def` and `await ` in prose and examples.
_ASYNC_WORDS = re.compile(r"\basync (with|for|def)\b|\bawait ")


class Renames:
    """The renames of one source: the shared tables plus the source's own."""

    def __init__(self, own: dict[str, str]) -> None:
        self.table = {**modules(), **NAMES, **own}
        self.words = re.compile(
            r"(?<![\w.])("
            + "|".join(re.escape(name) for name in sorted(self.table, key=len, reverse=True))
            + r")(?![\w])"
        )


def file_directives(source: str) -> tuple[dict[str, str], str]:
    """The source's own renames, and its text without them."""
    own: dict[str, str] = {}
    kept: list[str] = []
    for line in source.splitlines(keepends=True):
        match = _FILE_DIRECTIVE.match(line.rstrip("\n"))
        if match is None:
            kept.append(line)
        else:
            old, _, new = match.group(2).strip().partition(" ")
            if not new.strip():
                raise ValueError(f"`# async-to-sync: rename {old}` names no replacement")
            own[old] = new.strip()
    return own, "".join(kept)


def transform(source: str, *, source_path: str) -> str:
    """The synchronous twin of the asyncio module `source` (see the module doc)."""
    own, source = file_directives(source)
    renames = Renames(own)
    text = _rename_tokens(_apply_directives(_drop_async_blocks(source)), renames)
    shown = source_path.rsplit("/", 1)[-1]  # the source stands beside its twin
    body = _HEADER.format(source=shown) + text
    # Imports the asyncio flavour alone needed go; then the house format.
    tidied = _ruff(["check", "--fix", "--select", "I,F401", "--quiet", "--exit-zero"], body)
    return _ruff(["format"], tidied)


def _ruff(arguments: list[str], text: str) -> str:
    done = subprocess.run(  # noqa: S603 - our own interpreter running ruff, no shell
        [sys.executable, "-m", "ruff", *arguments, "--stdin-filename", "twin.py", "-"],
        input=text,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return done.stdout


def _drop_async_blocks(source: str) -> str:
    lines = source.splitlines(keepends=True)
    out: list[str] = []
    index = 0
    while index < len(lines):
        match = _IF_ASYNC.match(lines[index])
        if match is None:
            out.append(lines[index])
            index += 1
            continue
        indent = len(match.group(1))
        index = _skip_block(lines, index + 1, indent)
        if index < len(lines) and re.match(rf"^ {{{indent}}}else:\s*$", lines[index]):
            end = _skip_block(lines, index + 1, indent)
            out.extend(_dedent(line) for line in lines[index + 1 : end])
            index = end
    return "".join(out)


def _skip_block(lines: list[str], index: int, indent: int) -> int:
    """The index of the first line after the block that starts at `index`."""
    while index < len(lines):
        line = lines[index]
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        index += 1
    return index


def _dedent(line: str) -> str:
    return line[4:] if line.startswith("    ") else line.lstrip(" ")


def _apply_directives(source: str) -> str:
    out: list[str] = []
    for line in source.splitlines(keepends=True):
        match = _SYNC_DIRECTIVE.match(line.rstrip("\n"))
        if match is None:
            out.append(line)
        elif match.group(3).strip() != "drop":
            out.append(f"{match.group(1)}{match.group(3).strip()}\n")
    return "".join(out)


def _rename_tokens(source: str, renames: Renames) -> str:
    """Drop `async`/`await` and rename names, working on exact token positions."""
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def at(position: tuple[int, int]) -> int:
        return offsets[position[0] - 1] + position[1]

    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    edits: list[tuple[int, int, str]] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        if (
            token.type == tokenize.NAME
            and following is not None
            and (
                token.string == "await"
                or (token.string == "async" and following.string in {"def", "with", "for"})
            )
        ):
            edits.append((at(token.start), at(following.start), ""))
            index += 1
            continue
        if token.type == tokenize.NAME:
            end = _dotted_end(tokens, index)
            for cut in range(end, index, -1):  # the longest renamed prefix wins
                prefix = "".join(t.string for t in tokens[index:cut])
                if prefix in renames.table and tokens[cut - 1].type == tokenize.NAME:
                    replacement = renames.table[prefix]
                    edits.append((at(token.start), at(tokens[cut - 1].end), replacement))
                    index = cut
                    break
            else:
                index += 1  # `self.aclose`: the attribute is looked at on its own
            continue
        if token.type in {tokenize.STRING, tokenize.COMMENT}:
            renamed = renames.words.sub(lambda m: renames.table[m.group(1)], token.string)
            renamed = _ASYNC_WORDS.sub(lambda m: m.group(1) or "", renamed)
            if renamed != token.string:
                edits.append((at(token.start), at(token.end), renamed))
        index += 1
    text = source
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text


def _dotted_end(tokens: list[tokenize.TokenInfo], index: int) -> int:
    """The end of the dotted name `a.b.c` starting at `index` (exclusive)."""
    end = index + 1
    while (
        end + 1 < len(tokens)
        and tokens[end].string == "."
        and tokens[end + 1].type == tokenize.NAME
        and tokens[end].start == tokens[end - 1].end
    ):
        end += 2
    return end


def all_twins() -> dict[str, str]:
    """Every asyncio source -> its twin beside it, paths from the repository root."""
    return {
        path.relative_to(ROOT).as_posix(): twin_path(path).relative_to(ROOT).as_posix()
        for path in sorted(ROOT.glob(SOURCE_GLOB))
    }


def twin_path(source: Path) -> Path:
    """`X_async.py` -> `X.py`, in the same folder."""
    return source.with_name(source.name[: -len(SOURCE_SUFFIX)] + ".py")


def modules() -> dict[str, str]:
    """The dotted module of every asyncio source -> its twin's (`a.b_async` -> `a.b`)."""
    table = {}
    for source, twin in all_twins().items():
        table[_module(source)] = _module(twin)
    return table


def _module(path: str) -> str:
    return path.partition("/src/")[2].removesuffix(".py").replace("/", ".")


def gitattributes_text(current: str) -> str:
    """`.gitattributes` with its block of generated twins written afresh."""
    lines = [f"{twin} linguist-generated=true\n" for twin in all_twins().values()]
    block = _ATTRIBUTES_BEGIN + "".join(lines) + _ATTRIBUTES_END
    if _ATTRIBUTES_BEGIN in current and _ATTRIBUTES_END in current:
        head, _, rest = current.partition(_ATTRIBUTES_BEGIN)
        _, _, tail = rest.partition(_ATTRIBUTES_END)
        return head + block + tail
    return current + ("\n" if current and not current.endswith("\n") else "") + block


def stale_twins() -> list[str]:
    """The generated twins whose committed text differs from a fresh generation."""
    stale = []
    for source, twin in all_twins().items():
        expected = transform((ROOT / source).read_text(), source_path=source)
        target = ROOT / twin
        if not target.exists() or target.read_text() != expected:
            stale.append(twin)
    current = GITATTRIBUTES.read_text() if GITATTRIBUTES.exists() else ""
    if gitattributes_text(current) != current:
        stale.append(".gitattributes")
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale twins")
    options = parser.parse_args(argv)
    if options.check:
        stale = stale_twins()
        for twin in stale:
            print(f"stale: {twin} (run python tools/async_to_sync.py)")
        return 1 if stale else 0
    for source, twin in all_twins().items():
        (ROOT / twin).write_text(transform((ROOT / source).read_text(), source_path=source))
    current = GITATTRIBUTES.read_text() if GITATTRIBUTES.exists() else ""
    GITATTRIBUTES.write_text(gitattributes_text(current))
    return 0


if __name__ == "__main__":
    sys.exit(main())
