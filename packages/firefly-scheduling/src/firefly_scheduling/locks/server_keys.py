"""Map a lock name to a key the server accepts, identically on every node.

Servers limit key length (MySQL 64 characters, memcached 250 bytes), forbid some
characters (memcached: spaces and control characters) or compare names
case-insensitively (MySQL/MariaDB `GET_LOCK`). A name that is safe as it is stays
readable, which helps an operator looking at the server; any other name becomes a
digest. The two forms can never collide: a readable name is refused as readable when
it starts with the hashed prefix.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class ServerKeyScheme:
    """How one backend turns lock names into server keys.

    `readable` is the regular expression a name must match in full to be used as it
    is (after `readable_prefix`); everything else becomes `hashed_prefix` followed by
    the hex digest of the UTF-8 name.
    """

    readable_prefix: str
    hashed_prefix: str
    max_length: int
    readable: re.Pattern[str]
    digest: str = "sha256"

    def key(self, name: str) -> str:
        candidate = self.readable_prefix + name
        if (
            self.readable.fullmatch(name)
            and len(candidate.encode()) <= self.max_length
            and not candidate.startswith(self.hashed_prefix)
        ):
            return candidate
        digest = hashlib.new(self.digest, name.encode("utf-8")).hexdigest()
        return self.hashed_prefix + digest
