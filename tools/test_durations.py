"""Write `test-durations.txt`, the order the suite's scopes start in, from a run's report.

The root `conftest.py` collects the scopes `--dist loadscope` sends to a worker (a
module, or a test class) longest first, by the seconds this file lists. Measure them
in a run like CI's, with every phase reported:

    bash scripts/test --durations=0 --durations-min=0 > run.log 2>&1
    uv run python tools/test_durations.py run.log > test-durations.txt

Each scope's seconds are the sum of its tests' setup, call and teardown; scopes under
a second are left out (they count as short anyway).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

#: One line of pytest's durations report: `12.34s call     path::Class::test[id]`.
REPORT_LINE = re.compile(r"^(\d+(?:\.\d+)?)s (?:setup|call|teardown)\s+(\S.*)$")
SHORTEST = 1.0


def scope_seconds(report: str) -> dict[str, float]:
    """Seconds per scope (`path` or `path::Class`) summed over the report's lines."""
    seconds: dict[str, float] = {}
    for line in report.splitlines():
        match = REPORT_LINE.match(line.strip())
        if match is not None:
            scope = match.group(2).rsplit("::", 1)[0]
            seconds[scope] = seconds.get(scope, 0.0) + float(match.group(1))
    return seconds


def table(seconds: dict[str, float]) -> str:
    """The file's text: a header, then `seconds scope` per line, longest first."""
    lines = [
        "# Seconds per test scope (a module, or a test class) in a CI run, longest first:",
        "# the root conftest.py starts the scopes in this order. tools/test_durations.py",
        "# writes it from a run's `--durations=0 --durations-min=0` report.",
    ]
    longest_first = sorted(seconds.items(), key=lambda pair: -pair[1])
    lines += [f"{value:.1f} {scope}" for scope, value in longest_first if value >= SHORTEST]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: tools/test_durations.py REPORT", file=sys.stderr)
        return 2
    seconds = scope_seconds(Path(argv[0]).read_text(encoding="utf-8", errors="replace"))
    if not seconds:
        print(f"{argv[0]} has no durations report", file=sys.stderr)
        return 1
    sys.stdout.write(table(seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
