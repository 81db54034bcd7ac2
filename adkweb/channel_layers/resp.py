"""RESP2, as much of it as adkweb.channel_layers.wire's connection writes and reads: a command packed
(`pack`: str, bytes and int arguments) and one reply parsed from a buffer (`_parse`: integers, arrays,
bulk and simple strings, errors as redis-py's exceptions; `_Incomplete` until all of it is there)."""

from __future__ import annotations

from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError


def pack(*args: Any) -> bytes:
    """A command in RESP (what redis-py's `pack_command` makes, for str, bytes and int arguments)."""
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, str):
            arg = arg.encode()
        elif isinstance(arg, int):
            arg = b"%d" % arg
        out += (b"$%d\r\n" % len(arg), arg, b"\r\n")
    return b"".join(out)


class _Incomplete(Exception):
    pass


def _parse(buf: bytearray, pos: int) -> tuple[Any, int]:
    """One RESP2 reply from `buf` at `pos`: (value, position after it); _Incomplete if it is not all there."""
    end = buf.find(b"\r\n", pos)
    if end < 0:
        raise _Incomplete
    kind, line = buf[pos : pos + 1], bytes(buf[pos + 1 : end])
    pos = end + 2
    if kind == b":":
        return int(line), pos
    if kind == b"*":
        n = int(line)
        if n < 0:
            return None, pos
        items = []
        for _ in range(n):
            if buf[pos : pos + 1] == b":":  # an integer (a batch's counts): read here, no call
                end = buf.find(b"\r\n", pos)
                if end < 0:
                    raise _Incomplete
                items.append(int(buf[pos + 1 : end]))
                pos = end + 2
            else:
                item, pos = _parse(buf, pos)
                items.append(item)
        return items, pos
    if kind == b"$":
        n = int(line)
        if n < 0:
            return None, pos
        if len(buf) < pos + n + 2:
            raise _Incomplete
        return bytes(buf[pos : pos + n]), pos + n + 2
    if kind == b"+":
        return line.decode(), pos
    if kind == b"-":
        text = line.decode(errors="replace")
        return (NoScriptError(text) if text.startswith("NOSCRIPT") else ResponseError(text)), pos
    raise RedisConnectionError(f"Unexpected reply from Redis: {bytes(kind + line)!r}")
