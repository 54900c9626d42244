"""`/livez` and `/readyz` over HTTP, on the standard library's threaded server.

`run --health-port N` serves a `HostHealth` here, beside the scheduler: a probe is
answered in its own thread, so a slow backend never delays the scheduler, and the
scheduler never delays the answer. Any other path is a 404; only GET and HEAD are
served. Bodies are JSON.
"""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from firefly_scheduling.hosts.observation.health import HostHealth

logger = logging.getLogger("firefly_scheduling.hosts")

#: The paths served, each with the check that answers it.
PATHS = ("/livez", "/readyz")


def answer(health: HostHealth, path: str) -> tuple[int, dict[str, object]]:
    """The status and body of `path` (its query string ignored), 404 for an unknown path."""
    route = path.split("?", 1)[0].rstrip("/") or "/"
    if route == "/livez":
        return health.livez()
    if route == "/readyz":
        return health.readyz()
    return 404, {"error": f"unknown path {route!r}; try {' or '.join(PATHS)}"}


class HealthServer:
    """Serves `health` on `host:port` from a daemon thread until `close()`."""

    def __init__(self, health: HostHealth, *, host: str, port: int) -> None:
        self.health = health

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._reply(with_body=True)

            def do_HEAD(self) -> None:
                self._reply(with_body=False)

            def _reply(self, *, with_body: bool) -> None:
                status, body = answer(health, self.path)
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                if with_body:
                    self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:  # the stdlib's signature
                logger.debug("health: " + format, *args)

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="firefly-health", daemon=True
        )

    @property
    def port(self) -> int:
        """The bound port (the one asked for, or the kernel's choice for 0)."""
        return int(self._server.server_address[1])

    def start(self) -> HealthServer:
        self._thread.start()
        logger.info(
            "health endpoints on http://%s:%d/livez and /readyz",
            self._server.server_address[0],
            self.port,
        )
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
