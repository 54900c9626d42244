"""memcached's replies: their status codes, and the parser that cuts them from the stream.

Nothing here does I/O, and nothing here knows about locks: the parser turns the
bytes a connection receives into `Reply`s, whole, for the lock operations of
`protocol` to read, and `unexpected` turns a reply a command should not get into
the error it raises. A reply the parser does not know ends the connection's use
(`MemcachedProtocolError`): after it the stream is out of step for good.
"""

from __future__ import annotations

from typing import Final, NamedTuple

# Reply status codes of the classic storage commands...
STORED: Final = b"STORED"  # add, cas: stored
NOT_STORED: Final = b"NOT_STORED"  # add: the item exists
EXISTS: Final = b"EXISTS"  # cas: the item changed since it was read
NOT_FOUND: Final = b"NOT_FOUND"  # cas: no such item (expired, evicted, deleted)
# ...and of the meta commands.
DONE: Final = b"HD"  # md: deleted
META_EXISTS: Final = b"EX"  # md with C<cas>: the item changed since it was read
META_NOT_FOUND: Final = b"NF"  # md: no such item
MISS: Final = b"EN"  # mg: no such item
VALUE: Final = b"VA"  # mg/ma with v: a value follows
#: Errors end a reply too; the stream stays in step after them.
ERRORS: Final = frozenset({b"SERVER_ERROR", b"CLIENT_ERROR", b"ERROR"})


class MemcachedError(Exception):
    """memcached answered something a lock cannot use."""


class MemcachedServerError(MemcachedError):
    """memcached refused a command (`SERVER_ERROR out of memory ...`); the reply was whole.

    The connection is still in step with the server, so it may be used again.
    """


class MemcachedProtocolError(MemcachedError):
    """A reply this protocol does not know: the connection can no longer be trusted."""


class Reply(NamedTuple):
    """One parsed reply: its status code, its return flags, and its value if any."""

    status: bytes
    flags: tuple[bytes, ...]
    value: bytes | None


def unexpected(reply: Reply, command: str) -> MemcachedError:
    """The error for a reply a command should not get; the server's own words if any."""
    shown = b" ".join((reply.status, *reply.flags))[:64]
    if reply.status in ERRORS:
        text = shown.decode("ascii", "replace")
        return MemcachedServerError(f"memcached refused the {command} command: {text}")
    return MemcachedError(f"unexpected reply to the {command} command: {shown!r}")


class ReplyParser:
    """Cuts the byte stream from the server into `Reply`s, however it arrives.

    Feed it what the socket returns; `next_reply` returns each complete reply, or
    None until more bytes arrive. A reply it does not know raises
    `MemcachedProtocolError`: the stream is then out of step for good. A lock's
    replies nearly always arrive whole, one read each: the received bytes are kept
    as they are and read by position, never copied into a buffer first.
    """

    __slots__ = ("_data", "_position")

    def __init__(self) -> None:
        self._data = b""
        self._position = 0

    def feed(self, data: bytes) -> None:
        if self._position >= len(self._data):
            self._data = data
        else:
            self._data = self._data[self._position :] + data
        self._position = 0

    def next_reply(self) -> Reply | None:
        data, start = self._data, self._position
        end = data.find(b"\r\n", start)
        if end < 0:
            if len(data) - start > _MAX_LINE:
                raise MemcachedProtocolError(f"reply line too long: {data[start : start + 64]!r}")
            return None
        line = data[start:end]
        status, _, rest = line.partition(b" ")
        if status == VALUE:
            size_field, _, flags = rest.partition(b" ")
            if not size_field.isdigit():
                raise MemcachedProtocolError(f"malformed value header: {line[:64]!r}")
            value_start = end + 2
            value_end = value_start + int(size_field)
            if len(data) < value_end + 2:
                return None
            if data[value_end : value_end + 2] != b"\r\n":
                raise MemcachedProtocolError("a value is not followed by CRLF")
            self._position = value_end + 2
            return Reply(status, tuple(flags.split()), data[value_start:value_end])
        if status in ERRORS:
            # The rest of an error line is the server's message: keep it whole.
            self._position = end + 2
            return Reply(status, (rest,) if rest else (), None)
        if status not in _LINE_REPLIES:
            raise MemcachedProtocolError(f"unknown reply: {line[:64]!r}")
        self._position = end + 2
        return Reply(status, tuple(rest.split()), None)


#: Replies that are one line with no value.
_LINE_REPLIES: Final = frozenset(
    {STORED, NOT_STORED, EXISTS, NOT_FOUND, DONE, META_EXISTS, META_NOT_FOUND, MISS, b"MN"}
)
#: No reply line of these commands comes near this; a longer one is garbage.
_MAX_LINE: Final = 4096
