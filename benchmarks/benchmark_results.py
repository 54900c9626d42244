"""Where a benchmark's latest figures go: one JSON file and one markdown page per benchmark.

Every benchmark script of this folder ends its run by writing, under `--results`
(default `docs/results/`), `<name>.json` (the figures, machine-readable) and
`<name>.md` (the same figures as tables, with the facts of the run). The docs
include the markdown file (`docs/scaling.md` lists every benchmark's command and
where its figures are shown), so a page shows the figures of the last run of its
command and nothing typed by hand. A new
run replaces both files whole; git keeps the earlier ones.

Each file says when and where it was measured: the date, the commit (and whether
the work tree had uncommitted changes), the machine (CPU model, cores, memory,
kernel, Python), the load average at the start and the end, the servers' versions
where the benchmark talks to servers, and the command line. A run made with
`--short`, or with parameters other than the documented defaults, says so at the
top of its page: such figures prove the script and the writer, and are not the
reference. The facts are read by `benchmark_facts`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmark_facts import REPOSITORY, commit, machine, server_versions, servers_of

#: What the benchmark scripts import; `servers_of` comes from `benchmark_facts`.
__all__ = [
    "DEFAULT_FOLDER",
    "Run",
    "Table",
    "add_arguments",
    "non_defaults",
    "redact",
    "render",
    "servers_of",
    "shorten",
    "spread",
    "summary",
]

DEFAULT_FOLDER = REPOSITORY / "docs" / "results"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`--results DIR`, `--no-results` and `--short`, the same on every benchmark."""
    parser.add_argument(
        "--results",
        type=Path,
        default=DEFAULT_FOLDER,
        metavar="DIR",
        help="write <name>.json and <name>.md here [default: docs/results]",
    )
    parser.add_argument(
        "--no-results", action="store_true", help="print the tables only; write no results file"
    )
    parser.add_argument(
        "--short",
        action="store_true",
        help="a short run that proves the script works; its results file is marked as such",
    )


#: The password of a URL (`scheme://user:password@host`): never written to a results file.
_PASSWORD = re.compile(r"(?P<head>//[^/:@\s]*:)[^@/\s]+@")


def redact(value: Any) -> Any:
    """`value` with the password of any URL in it replaced by `***`."""
    if isinstance(value, str):
        return _PASSWORD.sub(r"\g<head>***@", value)
    if isinstance(value, Path):
        return redact(str(value))
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    return value


#: Options that choose where results go (or where a server log is read), not what is measured.
_OUTPUT_OPTIONS = frozenset(
    {"results", "no_results", "short", "profile_dir", "workdir", "json", "postgres_log"}
)


def shorten(args: argparse.Namespace, parser: argparse.ArgumentParser, **short: Any) -> None:
    """With `--short`, replace each option still at its default by its short value."""
    if not args.short:
        return
    for name, value in short.items():
        if getattr(args, name) == parser.get_default(name):
            setattr(args, name, value)


def non_defaults(
    args: argparse.Namespace, parser: argparse.ArgumentParser, selectors: Iterable[str] = ()
) -> dict[str, Any]:
    """The measured parameters given other values than the documented defaults.

    `selectors` name options that choose which results file a run writes (a mode of
    the script with a reference of its own), not a change to what is measured.
    """
    ignored = _OUTPUT_OPTIONS | set(selectors)
    return {
        name: value
        for name, value in vars(args).items()
        if name not in ignored and value != parser.get_default(name)
    }


# -- figures ---------------------------------------------------------------------------


def spread(values: Sequence[float], digits: int = 3, *, thousands: bool = False) -> str:
    """`median (min-max)`; one value alone; `-` for none."""
    if not values:
        return "-"
    form = f"{{:{',' if thousands else ''}.{digits}f}}"
    median = form.format(statistics.median(values))
    if len(values) == 1:
        return median
    return f"{median} ({form.format(min(values))}-{form.format(max(values))})"


def summary(values: Sequence[float]) -> dict[str, float | int | None]:
    """Median, min, max and count: the machine-readable twin of `spread`."""
    if not values:
        return {"median": None, "min": None, "max": None, "runs": 0}
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "runs": len(values),
    }


@dataclass
class Table:
    """A rendered table: a title line, column names and rows of cells."""

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list, kw_only=True)
    #: Column alignment, one character per column ("l" or "r"); default left.
    align: str = field(default="", kw_only=True)

    def markdown(self) -> str:
        marks = [
            "---:" if (self.align[i : i + 1] == "r") else "---" for i in range(len(self.columns))
        ]
        lines = [
            f"**{self.title}**" if self.title else "",
            "",
            "| " + " | ".join(self.columns) + " |",
            "|" + "|".join(marks) + "|",
        ]
        lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in self.rows]
        return "\n".join(lines[2:] if not self.title else lines)


def _cell(text: str) -> str:
    """A table cell: no line break, and no character markdown would read as markup."""
    escaped = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return escaped.replace("|", "\\|").replace("\n", " ")


# -- the run -----------------------------------------------------------------------------


class Run:
    """The facts of one benchmark run, taken at its start; `write` adds its figures."""

    def __init__(
        self,
        name: str,
        args: argparse.Namespace,
        parser: argparse.ArgumentParser,
        *,
        servers: Iterable[str] = (),
        selectors: Iterable[str] = (),
        uv_groups: Iterable[str] = (),
    ) -> None:
        self.name = name
        self.args = args
        self.started = datetime.now(UTC)
        self._monotonic = time.monotonic()
        self.load_start = os.getloadavg()[0]
        self.short = bool(getattr(args, "short", False))
        self.changed = non_defaults(args, parser, selectors)
        self.servers = server_versions(servers)
        #: The code measured is the code of the run's start.
        self.commit = commit()
        script = Path(sys.argv[0]).resolve()
        where = script.relative_to(REPOSITORY) if script.is_relative_to(REPOSITORY) else script
        self.script = script.name
        groups = [word for group in uv_groups for word in ("--group", group)]
        words = ["uv", "run", *groups, "python", str(where), *sys.argv[1:]]
        self.command = shlex.join(redact(_without_paths(words)))

    def status(self) -> str:
        if self.short:
            return "short"
        return "non-default" if self.changed else "reference"

    def write(
        self,
        title: str,
        tables: list[Table],
        figures: Any,
        *,
        notes: Sequence[str] = (),
        reproduce: str = "",
    ) -> tuple[Path, Path] | None:
        """Write `<name>.json` and `<name>.md` under `--results`; None with `--no-results`."""
        if getattr(self.args, "no_results", False):
            return None
        folder: Path = self.args.results
        folder.mkdir(parents=True, exist_ok=True)
        facts = {
            "benchmark": self.name,
            "script": self.script,
            "title": title,
            "status": self.status(),
            "started": self.started.isoformat(timespec="seconds"),
            "seconds": round(time.monotonic() - self._monotonic, 1),
            "command": self.command,
            "reproduce": reproduce or _documented_command(self.command),
            "parameters": {
                k: redact(v) for k, v in vars(self.args).items() if k not in _OUTPUT_OPTIONS
            },
            "non_default_parameters": {k: redact(v) for k, v in self.changed.items()},
            "commit": self.commit,
            "machine": machine(),
            "load_average": {"start": self.load_start, "end": os.getloadavg()[0]},
            "servers": self.servers,
            "figures": figures,
            "notes": list(notes),
        }
        json_path = folder / f"{self.name}.json"
        json_path.write_text(json.dumps(facts, indent=1, default=str) + "\n")
        markdown_path = folder / f"{self.name}.md"
        try:
            shown = folder.resolve().relative_to(REPOSITORY)
        except ValueError:
            shown = folder
        markdown_path.write_text(render(facts, tables, shown / json_path.name))
        print(f"# results written to {markdown_path} and {json_path.name}", file=sys.stderr)
        return json_path, markdown_path


_PATH_OPTIONS = ("--results", "--workdir", "--json", "--profile-dir", "--postgres-log")


def _without_paths(words: Sequence[str]) -> list[str]:
    """The words without the options naming where output goes: a machine's paths."""
    kept: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word in _PATH_OPTIONS:
            skip = True
            continue
        if word.startswith(tuple(f"{option}=" for option in _PATH_OPTIONS)):
            continue
        kept.append(word)
    return kept


def _documented_command(command: str) -> str:
    """The command without `--short` and output options: the one that makes the reference."""
    words = [w for w in shlex.split(command) if w not in ("--short", "--no-results")]
    return shlex.join(_without_paths(words))


def render(facts: dict[str, Any], tables: list[Table], json_path: Path) -> str:
    """The markdown page: a warning for a non-reference run, the facts, the tables."""
    lines = [
        f"<!-- Written by benchmarks/{facts.get('script', facts['benchmark'] + '.py')}: "
        "do not edit by hand; "
        "rerun the command below. -->",
        "",
    ]
    if facts["status"] == "short":
        lines += [
            '!!! warning "Short run: not a measurement"',
            "    These figures come from a short run (`--short`) that proves the benchmark "
            "and its results writer work. They are not the reference: run the command "
            "without `--short` on a quiet machine to measure.",
            "",
        ]
    elif facts["status"] == "non-default":
        changed = ", ".join(f"`{k}={v}`" for k, v in facts["non_default_parameters"].items())
        lines += [
            '!!! note "Parameters other than the documented defaults"',
            f"    This run changed {changed}; the reference is the command without them.",
            "",
        ]
    commit_facts = facts["commit"]
    commit_text = (
        f"`{commit_facts['hash'][:12]}`"
        + (" with uncommitted changes" if commit_facts["uncommitted_changes"] else "")
        if commit_facts["hash"]
        else "unknown (not a git checkout)"
    )
    machine_facts = facts["machine"]
    memory = f", {machine_facts['memory_gib']} GiB" if machine_facts["memory_gib"] else ""
    started = datetime.fromisoformat(facts["started"])
    rows = [
        ("measured", f"{started:%Y-%m-%d %H:%M} UTC, for {facts['seconds']:.0f} s"),
        ("commit", commit_text),
        (
            "machine",
            f"{machine_facts['cpus']} CPUs ({machine_facts['cpu_model']}){memory}, "
            f"{machine_facts['system']}, Python {machine_facts['python']}",
        ),
        (
            "load average (1 min)",
            f"{facts['load_average']['start']:.2f} at the start, "
            f"{facts['load_average']['end']:.2f} at the end",
        ),
    ]
    if facts["servers"]:
        rows.append(("servers", ", ".join(facts["servers"].values())))
    rows.append(("command", f"`{facts['command']}`"))
    if facts["reproduce"] != facts["command"]:
        rows.append(("reference command", f"`{facts['reproduce']}`"))
    lines += ["| run | |", "|---|---|"]
    lines += [f"| {label} | {_cell(value)} |" for label, value in rows]
    for table in tables:
        lines += ["", table.markdown()]
    if facts["notes"]:
        lines.append("")
        lines += [f"- {note}" for note in facts["notes"]]
    lines.append("")
    shown = json_path.resolve()
    shown = shown.relative_to(REPOSITORY) if shown.is_relative_to(REPOSITORY) else Path(shown.name)
    lines.append(f"Machine-readable: `{shown}`.")
    return "\n".join(lines) + "\n"
