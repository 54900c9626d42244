"""The claims a backend's server served during a cron fleet, timed by the server itself.

`benchmarks/fleet.py --jitter` asks how long the SERVER takes to serve a burst of fire
claims, not only how long the nodes wait for them (queueing in the client, the
network and the server's accept backlog is in the nodes' figure). Each probe reads
the server's own per-request timing, for the claims of one fleet only:

* Redis: `SLOWLOG` with a threshold of 0 µs, so every command is logged with the
  time the server spent executing it (µs) and its second. The claims are the
  `SET ... NX PX` of a `firefly:fire:` key of the fleet's task module (its name is
  unique per fleet: other clients' commands on the same server are left out). The
  threshold and the log's length are the server's settings: they are set for the
  window and put back after it (the log itself is shared, and is not reset).
* PostgreSQL: `pg_stat_statements` would need a server restart to load, so the
  statements are timed through `log_min_duration_statement = 0`, set for the fleet's
  database only (`ALTER DATABASE ... SET`, before the nodes connect; reset after), and
  read from the server's log: parse + bind + execute of each claim statement of that
  database, with its log time (ms). The log is the server's stderr, found through its
  `postmaster.pid` on a local server, or given (`--postgres-log`). Logging every
  statement costs the server a log line per statement: the figures of both variants
  pay it alike.

Other backends have no probe here: their server-side columns read "-".
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

#: What a claim's key or name starts with on every backend (`fires.claims.CLAIM_PREFIX`).
CLAIM_PREFIX = "firefly:fire:"
#: Slow log entries kept through one fleet: every command of 2 nodes x T tasks a minute.
SLOWLOG_LENGTH = 200_000


@dataclass(frozen=True)
class ServerClaim:
    """One claim request as the server served it: when (epoch seconds), for how long
    (ms), and how many fire claims it carried (a batch carries several)."""

    at: float
    ms: float
    claims: int


class ClaimProbe(Protocol):
    def prepare(self) -> None:
        """Before the nodes start (settings a new session reads when it connects)."""

    def begin(self) -> None:
        """Just before the measured window."""

    def end(self) -> tuple[list[ServerClaim], bool]:
        """After the window: the fleet's claims the server logged since `begin`, and
        whether the log held all of them (a full slow log drops its oldest entries)."""

    def close(self) -> None:
        """Put the server's settings back; safe to call more than once."""


def claim_probe(
    backend: str, provider_env: dict[str, str], module: str, postgres_log: Path | None
) -> ClaimProbe | None:
    """The server-side probe of `backend`'s claims of `module`'s tasks; None for others."""
    if backend == "redis":
        return RedisSlowlog(provider_env["FIREFLY_SCHEDULING_LOCK_REDIS_URL"], module)
    if backend == "postgres":
        return PostgresStatementLog(
            provider_env["FIREFLY_SCHEDULING_LOCK_POSTGRES_URL"], module, postgres_log
        )
    return None


class RedisSlowlog:
    """Every `SET` of the fleet's claim keys, from the server's slow log at threshold 0."""

    def __init__(self, url: str, module: str) -> None:
        import redis  # noqa: PLC0415 - only the Redis fleet needs it

        self._client = redis.Redis.from_url(url)
        self._module = module
        self._saved: dict[str, str] = {}
        self._after_id = -1

    def prepare(self) -> None:
        for name in ("slowlog-log-slower-than", "slowlog-max-len"):
            self._saved.update(_decoded(self._client.config_get(name)))
        self._client.config_set("slowlog-max-len", SLOWLOG_LENGTH)
        self._client.config_set("slowlog-log-slower-than", 0)

    def begin(self) -> None:
        newest = self._client.slowlog_get(1)
        self._after_id = int(newest[0]["id"]) if newest else -1

    def end(self) -> tuple[list[ServerClaim], bool]:
        entries = self._client.slowlog_get(-1)
        self.close()
        complete = any(int(entry["id"]) <= self._after_id + 1 for entry in entries)
        claims: list[ServerClaim] = []
        for entry in entries:
            if int(entry["id"]) <= self._after_id:
                continue
            command = _text(entry["command"])
            if command.startswith("SET ") and CLAIM_PREFIX in command and self._module in command:
                claims.append(ServerClaim(float(entry["start_time"]), entry["duration"] / 1000, 1))
        return sorted(claims, key=lambda claim: claim.at), complete

    def close(self) -> None:
        for name, value in self._saved.items():
            self._client.config_set(name, value)
        self._saved.clear()


def _decoded(mapping: Mapping[Any, Any]) -> dict[str, str]:
    return {_text(key): _text(value) for key, value in mapping.items()}


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


#: `%m [%p] %q%u@%d ` then the message: the Debian default `log_line_prefix`.
_LINE = re.compile(
    r"^(?P<at>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) (?P<zone>\S+) \[(?P<pid>\d+)\] "
    r"\S*@(?P<database>\S+) (?P<level>LOG|DETAIL):  (?P<message>.*)$"
)
_DURATION = re.compile(
    r"^duration: (?P<ms>[\d.]+) ms  (?P<phase>parse|bind|execute|statement)\b[^:]*: (?P<sql>.*)$"
)
_CLAIM_SQL = "INSERT INTO firefly_scheduling_claims"


class PostgresStatementLog:
    """Every claim statement of the fleet's database, from the server's statement log."""

    def __init__(self, url: str, module: str, log: Path | None) -> None:
        import psycopg  # noqa: PLC0415 - only the PostgreSQL fleet needs it

        self._connection = psycopg.connect(
            url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True
        )
        self._database = str(self._scalar("SELECT current_database()"))
        self._module = module
        self._log = log or self._server_log()
        self._offset = 0
        self._set = False

    def _scalar(self, query: str) -> object:
        row = self._connection.execute(query).fetchone()
        assert row is not None
        return row[0]

    def _server_log(self) -> Path:
        """The stderr of a local server: its postmaster's pid, then that process's fd 2."""
        pid = str(self._scalar("SELECT pg_read_file('postmaster.pid')")).split()[0]
        try:
            return Path(os.readlink(f"/proc/{pid}/fd/2"))
        except OSError as err:
            raise SystemExit(
                f"cannot find the PostgreSQL server's log (postmaster pid {pid}): {err}; "
                "pass --postgres-log FILE"
            ) from err

    def _alter(self, clause: str) -> None:
        from psycopg import sql  # noqa: PLC0415

        statement = sql.SQL("ALTER DATABASE {} " + clause).format(sql.Identifier(self._database))
        self._connection.execute(statement)

    def prepare(self) -> None:
        if not self._log.is_file():
            raise SystemExit(f"--postgres-log {self._log}: not a file")
        self._alter("SET log_min_duration_statement = 0")
        self._set = True

    def begin(self) -> None:
        self._offset = self._log.stat().st_size

    def end(self) -> tuple[list[ServerClaim], bool]:
        with self._log.open("rb") as handle:
            handle.seek(self._offset)
            text = handle.read().decode(errors="replace")
        self.close()
        return parse_statement_log(text, self._database, self._module), True

    def close(self) -> None:
        if self._set:
            self._alter("RESET log_min_duration_statement")
            self._set = False


def parse_statement_log(text: str, database: str, module: str) -> list[ServerClaim]:
    """The claim statements of `module`'s tasks in `database`'s statement log.

    A statement's parse, bind and execute (one backend pid) are summed; it counts when
    the parameters logged right after its execute (`DETAIL`) name the module's claims,
    and carries as many claims as they name (a batch names several). Another client's
    claims on the same database (the same SQL) are left out that way.
    """
    pending: dict[str, float] = {}
    executed: dict[str, tuple[float, float]] = {}
    claims: list[ServerClaim] = []
    for line in text.splitlines():
        match = _LINE.match(line)
        if match is None or match["database"] != database:
            continue
        pid = match["pid"]
        if match["level"] == "DETAIL":
            done = executed.pop(pid, None)
            carried = match["message"].count(f":{module}:")
            if done is not None and match["message"].startswith("parameters:") and carried:
                claims.append(ServerClaim(done[0], done[1], carried))
            continue
        executed.pop(pid, None)
        duration = _DURATION.match(match["message"])
        if duration is None or _CLAIM_SQL not in duration["sql"]:
            pending.pop(pid, None)
            continue
        if match["zone"] not in ("UTC", "GMT"):
            raise SystemExit(
                f"the PostgreSQL log's times are in {match['zone']}: set log_timezone UTC"
            )
        pending[pid] = pending.get(pid, 0.0) + float(duration["ms"])
        if duration["phase"] in ("execute", "statement"):
            at = datetime.fromisoformat(match["at"] + "+00:00").timestamp()
            executed[pid] = (at, pending.pop(pid))
    return claims
