"""The exception hierarchy.

Every error the library raises on purpose derives from `FireflySchedulingError`, so
an application can catch "anything firefly refused" in one clause. Configuration
errors are also `ValueError`s because that is what they are to a caller who passed
a bad value.
"""

from __future__ import annotations


class FireflySchedulingError(Exception):
    """Base class of every error raised by firefly-scheduling."""


class ConfigurationError(FireflySchedulingError, ValueError):
    """A value given by the application or the environment cannot be used.

    The message always names the offending value and where it came from (a task
    target, a settings key, a provider name) and never contains a credential.
    """


class DurationError(ConfigurationError):
    """A duration string or number could not be understood as a positive, finite length."""


class LockBackendError(FireflySchedulingError):
    """The lock server could not be reached or answered with an error.

    Raised by `try_acquire`; the scheduler treats it as "not acquired" and skips the
    run, so a task never runs unlocked because its lock server was down. The message
    names the backend and a redacted address, never a password.
    """


class BackendUnavailable(LockBackendError):
    """The lock backend did not answer at boot within the wait allowed; the host refuses.

    `run` and `tick` exit with status 3 (`BACKEND_UNAVAILABLE_EXIT`) on it, so an
    orchestrator tells "the server is down" (retry later) from a configuration error
    (exit 2, fix the input).
    """
