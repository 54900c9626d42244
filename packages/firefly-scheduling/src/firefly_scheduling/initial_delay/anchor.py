"""The anchor record: when a task was first observed, and by which release."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

#: Every anchor lives under this prefix followed by the task target.
ANCHOR_KEY_PREFIX = "firefly:scheduling:initial-delay:"
_FORMAT_VERSION = 1


def anchor_key(target: str) -> str:
    """The store key of the anchor of `target` (`"pkg.module:Qualname"`)."""
    return ANCHOR_KEY_PREFIX + target


@dataclass(frozen=True)
class Anchor:
    """The first observation of a task: epoch seconds on the store's clock, and the release."""

    observed_at: float
    release: str = ""

    def encode(self) -> str:
        return json.dumps(
            {"v": _FORMAT_VERSION, "observed_at": self.observed_at, "release": self.release},
            separators=(",", ":"),
            sort_keys=True,
        )

    @classmethod
    def decode(cls, raw: str) -> Anchor | None:
        """The anchor in `raw`, or None when it is not one this version wrote."""
        try:
            data = json.loads(raw)
        except ValueError:
            return None
        if not isinstance(data, dict) or data.get("v") != _FORMAT_VERSION:
            return None
        observed_at, release = data.get("observed_at"), data.get("release", "")
        if (
            not isinstance(observed_at, int | float)
            or isinstance(observed_at, bool)
            or not math.isfinite(observed_at)
            or not isinstance(release, str)
        ):
            return None
        return cls(float(observed_at), release)
