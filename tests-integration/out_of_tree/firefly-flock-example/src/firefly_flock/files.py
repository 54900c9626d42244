"""`flock://` URLs and the locked read-modify-write of one JSON record per key.

Every change holds the record file's `fcntl.flock` for its whole read-decide-write,
so processes of one host see each change whole. One file per key, named by the
key's SHA-256, so any key is a valid file name.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from firefly_scheduling.errors import ConfigurationError

_T = TypeVar("_T")
Record = dict[str, Any]


def directory_of(url: str, *, what: str) -> Path:
    """The directory a `flock:///absolute/dir` URL names; a `ConfigurationError` otherwise."""
    parts = urlsplit(url.strip())
    if parts.scheme != "flock" or not parts.path.startswith("/") or parts.netloc:
        raise ConfigurationError(
            f"the flock {what} needs a flock:///absolute/directory URL, got scheme "
            f"{parts.scheme or '(none)'!r}"
        )
    directory = Path(parts.path)
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def locked_update(
    directory: Path, key: str, change: Callable[[Record | None], tuple[Record | None, _T]]
) -> _T:
    """Apply `change` to the record of `key` under the file's exclusive lock.

    `change` gets the record (None: absent) and returns the record to write (None:
    delete it) and the result to hand back.
    """
    path = directory / hashlib.sha256(key.encode()).hexdigest()
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        with os.fdopen(os.dup(descriptor), "r+") as handle:
            text = handle.read()
            record, result = change(json.loads(text) if text else None)
            handle.seek(0)
            handle.truncate()
            if record is not None:
                handle.write(json.dumps(record))
        return result
    finally:
        os.close(descriptor)  # also releases the flock
