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
reference.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

REPOSITORY = Path(__file__).resolve().parent.parent
DEFAULT_FOLDER = REPOSITORY / "docs" / "results"
#: What a benchmark's figures depend on, for "uncommitted changes" in its results.
MEASURED_PATHS = ("packages", "benchmarks", "pyproject.toml", "uv.lock")


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


#: Options that choose where results go, not what is measured.
_OUTPUT_OPTIONS = frozenset({"results", "no_results", "short", "profile_dir", "workdir", "json"})


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


# -- the facts of a run ----------------------------------------------------------------


def commit() -> dict[str, Any]:
    """The commit measured, and whether its code in the work tree differed from it."""

    def git(*arguments: str) -> str:
        return subprocess.run(
            ["git", *arguments], cwd=REPOSITORY, capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        head = git("rev-parse", "HEAD")
        # Only the code measured counts: the results files a run rewrites, and docs
        # edited meanwhile, change no figure.
        status = git("status", "--porcelain", "--", *MEASURED_PATHS).splitlines()
        changed = [line for line in status if line.strip()]
    except (OSError, subprocess.CalledProcessError):
        return {"hash": None, "uncommitted_changes": None}
    return {"hash": head, "uncommitted_changes": bool(changed)}


def machine() -> dict[str, Any]:
    """What the figures depend on: CPU, cores, memory, kernel, Python."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory_kib = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_kib = int(line.split()[1])
                break
    except OSError:
        pass
    return {
        "cpu_model": model or platform.processor() or "unknown",
        "cpus": os.cpu_count(),
        "memory_gib": round(memory_kib / 1024 / 1024, 1) if memory_kib else None,
        "system": platform.platform(),
        "python": platform.python_version(),
    }


def server_versions(kinds: Iterable[str]) -> dict[str, str]:
    """The version each server of `kinds` reports (postgres, mysql, redis, memcached,
    etcd), read from the `FIREFLY_TEST_*_URL` servers the benchmarks use by default;
    a server that does not answer is reported as such, not left out."""
    readers: dict[str, Callable[[], str]] = {
        "postgres": _postgres_version,
        "mysql": _mysql_version,
        "redis": _redis_version,
        "memcached": _memcached_version,
        "etcd": _etcd_version,
    }
    versions = {}
    for kind in sorted(set(kinds)):
        try:
            versions[kind] = readers[kind]()
        except Exception as err:  # noqa: BLE001 - a fact of the run, reported as it is
            versions[kind] = f"unknown ({type(err).__name__})"
    return versions


#: The server each backend name of the benchmarks talks to (SQLite and memory: none).
SERVER_OF = {
    "postgres": "postgres",
    "database-postgres": "postgres",
    "mysql": "mysql",
    "database-mysql": "mysql",
    "database-mariadb": "mysql",
    "redis": "redis",
    "redis-cluster": "redis",
    "redis_cluster": "redis",
    "memcached": "memcached",
    "etcd": "etcd",
}


def servers_of(backends: Iterable[str]) -> list[str]:
    return sorted({SERVER_OF[b] for b in backends if b in SERVER_OF})


def _url(kind: str, default: str) -> str:
    return os.environ.get(f"FIREFLY_TEST_{kind.upper()}_URL", default)


def _postgres_version() -> str:
    import psycopg  # noqa: PLC0415

    url = _url("postgres", "postgresql://postgres@127.0.0.1:5432/test")
    with psycopg.connect(url, connect_timeout=3) as connection:
        row = connection.execute("SHOW server_version").fetchone()
    return f"PostgreSQL {row[0] if row else '?'}"


def _mysql_version() -> str:
    import pymysql  # noqa: PLC0415

    parts = urlsplit(_url("mysql", "mysql://root@127.0.0.1:3306/test"))
    connection = pymysql.connect(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 3306,
        user=parts.username or "root",
        password=parts.password or "",
        connect_timeout=3,
    )
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT VERSION()")
            row = cursor.fetchone()
    finally:
        connection.close()
    text = str(row[0]) if row else "?"
    return f"MariaDB {text}" if "mariadb" in text.lower() else f"MySQL {text}"


def _redis_version() -> str:
    import redis  # noqa: PLC0415

    client = redis.Redis.from_url(_url("redis", "redis://127.0.0.1:6379/0"), socket_timeout=3)
    try:
        return f"Redis {client.info('server')['redis_version']}"
    finally:
        client.close()


def _memcached_version() -> str:
    import socket  # noqa: PLC0415

    parts = urlsplit(_url("memcached", "memcached://127.0.0.1:11211"))
    with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 11211), 3) as s:
        s.sendall(b"version\r\n")
        answer = s.recv(256).decode().split()
    return f"memcached {answer[1] if len(answer) > 1 else '?'}"


def _etcd_version() -> str:
    import http.client  # noqa: PLC0415

    parts = urlsplit(_url("etcd", "etcd://127.0.0.1:2379"))
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 2379, 3)
    try:
        connection.request("GET", "/version")
        answer = json.loads(connection.getresponse().read())
    finally:
        connection.close()
    return f"etcd {answer.get('etcdserver', '?')}"


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


_PATH_OPTIONS = ("--results", "--workdir", "--json", "--profile-dir")


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
