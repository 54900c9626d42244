"""Private throwaway servers for fault tests: restarts, outages, misconfiguration.

Fault tests must never stop or reconfigure the shared servers other tests use. A
test that needs to starts its own server process on a free loopback port with
`LocalServer`, and stops it through its own process handle, never by name. When
the server binary is not installed the test is skipped: these are extra fault
tests, while the contract itself runs on the shared servers.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from types import TracebackType

import pytest

#: Longest a server may take to accept connections after it was started.
READY_TIMEOUT_SECONDS = 10.0


def free_local_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def running_as_root() -> bool:
    """Whether servers that refuse to run as root (memcached) need to be told they may."""
    return hasattr(os, "geteuid") and os.geteuid() == 0


class LocalServer:
    """One server process of this test, on `port`, that can be stopped and started again.

    `command(port)` returns the argv; the port stays the same across restarts, so a
    client configured before a restart reconnects to the new process.
    """

    def __init__(self, command: Callable[[int], Sequence[str]]) -> None:
        self.port = free_local_port()
        self._command = command
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the server and wait (bounded) until it accepts connections."""
        argv = list(self._command(self.port))
        if shutil.which(argv[0]) is None:
            pytest.skip(f"{argv[0]} is not installed: this fault test needs a private server")
        process = subprocess.Popen(  # noqa: S603 - argv built by the test, no shell
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self._process = process
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while True:
            if process.poll() is not None:
                self._process = None
                raise RuntimeError(f"{argv[0]} exited with status {process.returncode}: {argv}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"{argv[0]} did not listen on port {self.port}") from None
                time.sleep(0.05)
            else:
                return

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 5 s); safe to call twice."""
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
