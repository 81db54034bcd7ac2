"""The publish script's own connection (adkweb.channel_layers.wire), against a fake Redis on a local
socket: replies in order to their commands also when they arrive in pieces or together, a cancelled
caller's reply dropped without shifting the next one's, an error reply raised to its caller only, and
a reply that never comes or a connection the server closes fails what waits on it, the next command
on a new connection; commands written together (the layer's joins), and a blocking command (the
reader's pop) whose cancelled caller closes its connection. (Against the real Redis:
tests/integration/test_publish_wire.py, test_channel_layer_cancel.py.)"""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from adkweb.channel_layers.wire import Wire, Wires, pack


class FakeRedis:
    """Answers each command with the next of `replies` (bytes), each written as `chunks` says:
    'whole', 'bytes' (one byte at a time) or held back ('never'); or closes the connection."""

    def __init__(self) -> None:
        self.replies: list[bytes | str] = []
        self.commands: list[list[bytes]] = []
        self.connections = 0
        self.server: asyncio.base_events.Server | None = None
        self.pending = b""
        self.batch = 1  # commands answered together in one write

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                args = []
                for _ in range(int(line[1:])):
                    size = int((await reader.readline())[1:])
                    args.append((await reader.readexactly(size + 2))[:-2])
                self.commands.append(args)
                reply = self.replies.pop(0)
                if reply == "close":
                    writer.close()
                    return
                if reply == "never":
                    continue
                self.pending += reply
                if len(self.commands) % self.batch:
                    continue
                out, self.pending = self.pending, b""
                if self.bytewise:
                    for i in range(len(out)):
                        writer.write(out[i : i + 1])
                        await writer.drain()
                        await asyncio.sleep(0)
                else:
                    writer.write(out)
        except (ConnectionError, asyncio.IncompleteReadError):
            return

    bytewise = False


@pytest.fixture
async def fake():
    redis = FakeRedis()
    port = await redis.start()
    redis.wires = Wires(
        SimpleNamespace(
            connection_kwargs={"host": "127.0.0.1", "port": port, "socket_timeout": 0.3}, connection_class=object
        )
    )
    yield redis
    redis.server.close()


def test_pack_is_redis_pys_command():
    from redis.asyncio.connection import Connection

    args = ("EVALSHA", "abc", 2, "k1", "k2", b"\x00\xffbin", "1796435198.5621893", -3)
    assert pack(*args) == b"".join(Connection().pack_command(*args))


async def test_replies_reach_their_commands_in_order_also_in_pieces_and_together(fake):
    fake.replies = [b"*3\r\n:0\r\n:12\r\n:-1\r\n", b"$5\r\nhello\r\n", b"+OK\r\n", b"*2\r\n*1\r\n:7\r\n$-1\r\n"]
    fake.bytewise = True
    fake.batch = 2  # two replies in one write, byte by byte
    got = await asyncio.gather(
        fake.wires.call("EVALSHA", "x", 0),
        fake.wires.call("GET", "k"),
        fake.wires.call("SET", "k", "v"),
        fake.wires.call("EVAL", "y", 0),
    )
    assert got == [[0, 12, -1], b"hello", "OK", [[7], None]]
    assert fake.connections == 1
    assert [c[0] for c in fake.commands] == [b"EVALSHA", b"GET", b"SET", b"EVAL"]


async def test_an_error_reply_is_raised_to_its_caller_only(fake):
    fake.replies = [b"-NOSCRIPT No matching script.\r\n", b"-ERR wrong\r\n", b":1\r\n"]
    first, second, third = await asyncio.gather(
        fake.wires.call("EVALSHA", "x", 0), fake.wires.call("X"), fake.wires.call("Y"), return_exceptions=True
    )
    assert isinstance(first, NoScriptError) and isinstance(second, ResponseError) and third == 1
    assert fake.connections == 1  # an error reply leaves the connection as it is


async def test_a_cancelled_callers_reply_is_dropped_and_the_next_gets_its_own(fake):
    fake.replies = [b":1\r\n", b":2\r\n"]
    fake.batch = 2  # the first reply comes only with the second's
    first = asyncio.ensure_future(fake.wires.call("FIRST"))
    while not fake.commands:
        await asyncio.sleep(0.01)
    first.cancel()
    assert await fake.wires.call("SECOND") == 2
    assert first.cancelled()


async def test_a_reply_that_never_comes_fails_what_waits_and_the_next_command_reconnects(fake):
    fake.replies = ["never", b":5\r\n"]
    with pytest.raises(RedisTimeoutError):
        await asyncio.wait_for(fake.wires.call("SLOW"), 5)  # the wire's own timeout is 0.3 s
    assert await fake.wires.call("NEXT") == 5
    assert fake.connections == 2


async def test_a_connection_keeps_one_time_out_timer_not_one_a_command(fake, monkeypatch):
    """Each command's time-out is still its own (below), but a connection arms one timer for its oldest
    reply, not a timer (and its cancel) for every command: a batch's round trip paid for both."""
    fake.replies = [b":1\r\n"] * 20
    fake.batch = 20  # all the replies come together, after the last command
    loop = asyncio.get_running_loop()
    armed, call_at = [], loop.call_at  # call_later arms through call_at
    monkeypatch.setattr(loop, "call_at", lambda *a, **kw: armed.append(a[1]) or call_at(*a, **kw))
    assert await asyncio.gather(*(fake.wires.call("PING") for _ in range(20))) == [1] * 20
    assert len([f for f in armed if isinstance(getattr(f, "__self__", None), Wire)]) == 1


async def test_a_command_after_answered_ones_times_out_at_its_own_time(fake):
    """The timer armed for the first command fires while the second, written later, still has time:
    it is armed again for the second's time-out, which then fails it."""
    fake.replies = [b":1\r\n", "never", b":3\r\n"]
    assert await fake.wires.call("FIRST") == 1
    await asyncio.sleep(0.2)  # the first's time-out (0.3 s) passes while the second waits
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(RedisTimeoutError):
        await asyncio.wait_for(fake.wires.call("SECOND"), 5)
    assert 0.25 <= loop.time() - started < 1.0  # its own 0.3 s, from when it was written
    assert await fake.wires.call("THIRD") == 3


async def test_a_connection_the_server_closes_fails_what_waits_and_the_next_command_reconnects(fake):
    fake.replies = ["close", b":6\r\n"]
    with pytest.raises(RedisConnectionError):
        await fake.wires.call("DROPPED")
    assert await fake.wires.call("NEXT") == 6
    assert fake.connections == 2


async def test_nothing_listening_raises_redis_pys_connection_error():
    wires = Wires(SimpleNamespace(connection_kwargs={"host": "127.0.0.1", "port": 1}, connection_class=object))
    with pytest.raises(RedisConnectionError):
        await wires.call("PING")


async def test_the_connection_selects_the_pools_db_and_authenticates_first(fake):
    fake.replies = [b"+OK\r\n", b"+OK\r\n", b":1\r\n"]
    fake.wires.kwargs.update(db=6, username="u", password="p")
    assert await fake.wires.call("X") == 1
    assert fake.commands == [[b"AUTH", b"u", b"p"], [b"SELECT", b"6"], [b"X"]]


async def test_commands_written_together_get_their_replies_in_order_an_error_raised(fake):
    fake.replies = [b":1\r\n", b":0\r\n", b"-ERR wrong\r\n", b":4\r\n"]
    fake.batch = 2  # both replies in one write
    assert await fake.wires.call_all(("ZADD", "g", "1.5", "m"), ("EXPIRE", "g", 86400)) == [1, 0]
    with pytest.raises(ResponseError):
        await fake.wires.call_all(("X",), ("Y",))
    assert [c[0] for c in fake.commands] == [b"ZADD", b"EXPIRE", b"X", b"Y"]
    assert fake.connections == 1


async def test_a_blocking_command_cancelled_while_it_waits_closes_its_connection(fake):
    """The server's blocked pop must end with the caller: its connection is closed (a pop left
    blocked would take a message into a reply nobody reads); the next command opens another."""
    fake.replies = ["never", b"*-1\r\n"]
    waiting = asyncio.ensure_future(fake.wires.blocking("BZMPOP", 5, 1, "k", "MIN", "COUNT", 64))
    while not fake.commands:
        await asyncio.sleep(0.01)
    wire = fake.wires._by_loop[asyncio.get_running_loop()]
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert wire.transport.is_closing()
    assert await fake.wires.blocking("BZMPOP", 5, 1, "k", "MIN", "COUNT", 64) is None
    assert fake.connections == 2


async def test_a_blocking_commands_wires_wait_longer_than_its_own_timeout(fake):
    pool = SimpleNamespace(connection_kwargs=dict(fake.wires.kwargs), connection_class=object)
    assert Wires(pool, at_least=10.0).kwargs["socket_timeout"] == 10.0  # the pool's 0.3 s would fail a 5 s pop
    assert Wires(pool, at_least=0.1).kwargs["socket_timeout"] == 0.3


def test_a_loop_closed_while_another_loop_runs_in_the_thread_still_closes():
    """A loop whose wire was opened is closed by its owner's finalizer, which the garbage collector may
    run on any thread, also one running a loop of its own (a worker's drain thread): the close may not
    run the closed loop then ("Cannot run the event loop while another loop is running": the loop and
    its connection were left open, seen in CI as an unraisable exception), but it must close it."""
    redis, served = FakeRedis(), asyncio.new_event_loop()  # the fake Redis on a thread of its own
    threading.Thread(target=served.run_forever, daemon=True).start()
    port = asyncio.run_coroutine_threadsafe(redis.start(), served).result(5)
    wires = Wires(
        SimpleNamespace(
            connection_kwargs={"host": "127.0.0.1", "port": port, "socket_timeout": 0.3}, connection_class=object
        )
    )
    redis.replies = [b"+PONG\r\n"]
    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(wires.call("PING")) == "PONG"

        async def elsewhere() -> None:
            loop.close()

        asyncio.run(elsewhere())
        assert loop.is_closed() and wires._by_loop == {}
    finally:
        if not loop.is_closed():
            loop.close()

        async def stop() -> None:
            redis.server.close()
            for task in asyncio.all_tasks() - {asyncio.current_task()}:
                task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), served).result(5)
        served.call_soon_threadsafe(served.stop)
