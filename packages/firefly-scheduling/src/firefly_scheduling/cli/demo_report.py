"""What the demo prints: one line per fire as the nodes report it, then a table per task.

Built from the fire log the nodes append to (`--fire-log`), so it shows what each
node decided, in the fire runner's own words, not what the demo expected.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Literal

from rich.console import Console
from rich.table import Table

from firefly_scheduling.cli.output import text_column
from firefly_scheduling.fires.outcome import verdict_words
from firefly_scheduling.hosts.observation.fire_log import FireRecord

# How long a fire's line waits for the nodes that have not reported on it yet.
_FEED_DELAY_SECONDS = 1.0
_VERDICT_STYLES = {
    "succeeded": "bold cyan",
    "failed": "bold red",
    "timed out": "bold red",
    "claimed elsewhere": "dim",
}


def verdict_of(record: FireRecord) -> str:
    """The verdict in words: `claimed_elsewhere` reads "claimed elsewhere"."""
    return verdict_words(record.status)


@dataclass
class TaskTally:
    """What the fire log says about one task."""

    locked: bool = False
    fires: set[str] = field(default_factory=set)
    runs: Counter[str] = field(default_factory=Counter)
    by_node: Counter[str] = field(default_factory=Counter)
    not_run: Counter[str] = field(default_factory=Counter)

    def add(self, record: FireRecord) -> None:
        self.locked = record.locked
        self.fires.add(record.instant)
        if record.ran:
            self.runs[record.instant] += 1
            self.by_node[record.node] += 1
        else:
            self.not_run[verdict_of(record)] += 1

    @property
    def duplicates(self) -> int:
        return sum(count - 1 for count in self.runs.values())


class FireFeed:
    """Prints one line per fire, gathering every node's record of it first."""

    def __init__(self, console: Console, nodes: int) -> None:
        self._console = console
        self._nodes = nodes
        self._pending: dict[tuple[str, str], tuple[float, list[FireRecord]]] = {}

    def add(self, records: list[FireRecord]) -> None:
        now = time.monotonic()
        for record in records:
            key = (record.instant, record.target)
            self._pending.setdefault(key, (now, []))[1].append(record)

    def flush(self, *, everything: bool = False) -> None:
        """Print, in order of instant, the fires every node reported on or that waited enough.

        A fire of an earlier instant still waiting for records is printed too when a
        later one is, so the lines stay in order of instant; any record that comes
        after that gets a line of its own. A fire of the same instant keeps waiting.
        """
        cutoff = time.monotonic() - _FEED_DELAY_SECONDS
        ready = {
            key
            for key, (seen, records) in self._pending.items()
            if everything or seen <= cutoff or len(records) >= self._nodes
        }
        if not ready:
            return
        latest_instant = max(instant for instant, _ in ready)
        for key in sorted(self._pending):
            if key in ready or key[0] < latest_instant:
                _, records = self._pending.pop(key)
                self._console.print(_fire_line(records))


def _fire_line(records: list[FireRecord]) -> str:
    first = records[0]
    nodes_by_verdict: dict[str, list[str]] = defaultdict(list)
    for record in sorted(records, key=lambda r: (not r.ran, r.node)):
        verdict = verdict_of(record) + (" (adopted a died run)" if record.adoption else "")
        nodes_by_verdict[verdict].append(record.node)
    parts = []
    for verdict, nodes in nodes_by_verdict.items():
        style = _VERDICT_STYLES.get(verdict, "yellow")
        parts.append(f"[{style}]{', '.join(nodes)} {verdict}[/]")
    task = first.target.rpartition(":")[2]
    scope = "" if first.locked else "  [dim](unlocked: every node runs it)[/]"
    return f"{first.instant[11:23]}  {task:<24} {' · '.join(parts)}{scope}"


def print_summary(console: Console, tallies: dict[str, TaskTally], app: str | None = None) -> None:
    """The per-task table; with `app`, targets are shown relative to it, named in the title."""
    prefix = f"{app}." if app else ""
    names = {
        target: target.removeprefix(prefix) if target.startswith(prefix) else target
        for target in tallies
    }
    table = Table(title=f"per task of {app}" if app else "per task", title_justify="left")
    # A target is a name: never cut or folded; the other columns wrap around it.
    table.add_column("task", no_wrap=True, min_width=max(map(len, names.values()), default=4))
    rows = [
        (
            "yes" if tallies[target].locked else "no",
            str(len(tallies[target].fires)),
            str(sum(tallies[target].runs.values())),
            str(tallies[target].duplicates) if tallies[target].locked else "-",
            ", ".join(f"{node}: {n}" for node, n in sorted(tallies[target].by_node.items())),
            ", ".join(f"{why}: {n}" for why, n in tallies[target].not_run.most_common()),
        )
        for target in sorted(tallies)
    ]
    headers = ("locked", "fires", "runs", "duplicates", "runs per node", "not run: why")
    for index, header in enumerate(headers):
        justify: Literal["left", "right"] = "right" if header in _NUMBERS else "left"
        text_column(table, header, (row[index] for row in rows), justify=justify)
    for target, row in zip(sorted(tallies), rows, strict=True):
        tally = tallies[target]
        style = "red" if tally.locked and tally.duplicates else None
        table.add_row(names[target], *row, style=style)
    console.print(table)


_NUMBERS = frozenset({"fires", "runs", "duplicates"})
