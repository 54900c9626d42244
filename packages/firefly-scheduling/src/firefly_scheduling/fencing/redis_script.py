"""The one Lua script of a fenced Redis write, and its key layout, for both flavours.

Layout: the guarded key is ONE hash, `key`, with two fields: `value`, the value, and
`fence_token`, the token of the write that stored it (decimal). One key lives in one
slot, so the script runs on Redis Cluster as it is, without a hash tag; read the
value with `HGET key value`.

Tokens are compared as decimal strings (length first, then text), not as Lua
numbers, which are doubles and lose exactness past 2**53.
"""

from __future__ import annotations

import hashlib
from typing import Final

from firefly_scheduling.fencing.token import FencingTokenError, checked_token

VALUE_FIELD: Final = "value"
TOKEN_FIELD: Final = "fence_token"  # noqa: S105 - a hash field's name, not a secret

#: KEYS[1] the hash; ARGV[1] the value; ARGV[2] the token (decimal, no leading zero).
#: Returns 1 when the value and token were stored, 0 when the stored token is greater
#: (nothing written). A hash without a token field (or no key) takes any token.
FENCED_SET: Final = """
local stored = redis.call('hget', KEYS[1], 'fence_token')
if stored and (#stored > #ARGV[2] or (#stored == #ARGV[2] and stored > ARGV[2])) then
    return 0
end
redis.call('hset', KEYS[1], 'value', ARGV[1], 'fence_token', ARGV[2])
return 1
"""
FENCED_SET_SHA: Final = hashlib.sha1(FENCED_SET.encode(), usedforsecurity=False).hexdigest()

RedisValue = bytes | str | int | float


def fenced_set_arguments(
    key: object, value: object, token: object, *, caller: str
) -> tuple[str | bytes, RedisValue, str]:
    """The script's key, value and token argument; a bad one raises before anything is sent."""
    checked = checked_token(token, caller=caller)
    if not isinstance(key, str | bytes) or not key:
        raise FencingTokenError(f"{caller}: the key must be a non-empty str or bytes, got {key!r}")
    if isinstance(value, bool) or not isinstance(value, bytes | str | int | float):
        raise FencingTokenError(
            f"{caller}: the value must be bytes, str, int or float, got {type(value).__name__}"
        )
    return key, value, str(checked)
