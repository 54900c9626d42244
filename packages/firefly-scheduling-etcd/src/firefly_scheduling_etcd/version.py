"""The installed version of `firefly-scheduling-etcd`, read back from its metadata.

The one place the version is written is `version` in this distribution's
pyproject.toml; reading it here means `__version__` cannot drift from what was
installed.
"""

from __future__ import annotations

from importlib.metadata import version

__version__ = version("firefly-scheduling-etcd")
