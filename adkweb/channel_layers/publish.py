"""A batch of group messages in one round trip (the Redis layer's `group_send_many`).

channels_redis's `group_send` takes four round trips per message (drop the group's expired members,
read its members, drop each member channel's expired messages, a script adding the message to each
channel's sorted set), and the sender usually asks first whether anyone watches (a ZCARD per
group). A turn's worker published ~9 such messages per stored event; the web's `/run` and approve
views a few more. Here a batch of (group, message) pairs, in the order they were made, goes to
Redis as one script that does the same for every pair (the same keys, the same expiry rules, the
same capacity check and the same stored form, so any channels_redis reader reads it), and also
answers how many members each group named has: the publisher's question "is anyone watching" rides
with the messages it has to send anyway.

Order. Each pair gets its own score, later than the previous pair's (and than any score this
process gave before), so a channel's messages of one batch are popped in the batch's order (a
channel's sorted set orders by score; channels_redis's messages sent within one clock tick were
ordered by their random prefix). A batch sends its first score in whole microseconds and the script
makes each pair's, one microsecond after the previous (in seconds, as channels_redis's scores):
no float formatted in Python (repr: ~7 k instructions a float, one per pair before).

The stored form is channels_redis's: the serializer's random prefix, then a msgpack map of the
message and `__asgi_channel__` (the list of the group's members on that channel). Python packs the
map with `__asgi_channel__` last and its value cut off; the script appends each channel's list
(cmsgpack). A message sent to several groups (the same dict: a fragment for each audience, a status
for a conversation and the list) is packed once and sent once in ARGV; every pair still gets a
random prefix of its own (channels_redis's: two copies of one message for one channel, in two
groups it is in, are two members of its sorted set, not one). Where that cannot hold (encryption,
another serializer, several Redis hosts, channel capacities by pattern), the batch is sent with
channels_redis's `group_send`, one message after the other, as before.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import msgpack
from channels_redis.serializers import MsgPackSerializer

from .publish_script import SCRIPT, SHA
from .wire import Wires

logger = logging.getLogger(__name__)
__all__ = ["SCRIPT", "SHA", "BatchPublisher"]  # the script's (publish_script), read from here by tests and benches

CHANNELS_KEY = "__asgi_channel__"
GROUP_KEYS_KEPT = 4096  # group names checked and their keys, kept per layer (then forgotten all at once)
NIL = b"\xc0"  # msgpack's nil: the value packed last, cut off for the script's list


_local = threading.local()


def _packer() -> msgpack.Packer:
    """This thread's msgpack packer: `msgpack.packb(o)` is `Packer().pack(o)`, a new packer (and its
    buffer) at every call; a packer resets after each `pack` (worker threads share the layer)."""
    packer = getattr(_local, "packer", None)
    if packer is None:
        packer = _local.packer = msgpack.Packer()
    return packer


class BatchPublisher:
    """Mixin of the Redis layer: `group_send_many`. Needs channels_redis's layer attributes."""

    _last_micros = 0
    _scores_lock = threading.Lock()  # worker threads share the layer, each on a loop of its own
    _script: Any = None
    _wires: Wires | None = None  # the script's own connections (adkweb.channel_layers.wire), if usable

    @functools.cached_property
    def _group_keys(self) -> dict[str, bytes]:
        return {}

    def _one_script(self) -> bool:
        """Whether a batch can go as one script (see the module docstring)."""
        serializer = self._serializer  # type: ignore[attr-defined]
        return (
            isinstance(serializer, MsgPackSerializer)
            and type(serializer).as_bytes is msgpack.packb  # `_stored_form` packs as it does
            and serializer.crypter is None
            and self.ring_size == 1  # type: ignore[attr-defined]
            and not self.channel_capacity  # type: ignore[attr-defined]
        )

    def _first_score(self, n: int) -> int:
        """The first of n scores, in microseconds (the script adds one per pair): each later than the one
        before and than every score given before."""
        with self._scores_lock:
            micros = max(time.time_ns() // 1000, self._last_micros + 1)
            if n:
                self._last_micros = micros + n - 1
        return micros

    def _stored_form(self, message: dict) -> bytes:
        """The message as channels_redis stores it, without its random prefix and the value of
        `__asgi_channel__`: the serializer's `msgpack.packb` (`_one_script`), by this thread's packer."""
        assert isinstance(message, dict), "message is not a dict"
        assert CHANNELS_KEY not in message
        packed: bytes = _packer().pack({**message, CHANNELS_KEY: None})
        assert packed.endswith(NIL)
        return packed[:-1]

    async def group_send_many(self, pairs: Iterable[tuple[str, dict]], ask: Iterable[str] = ()) -> dict[str, int]:
        """Send each (group, message) to its group, in this order, and return the number of members of
        every group named (sent to or in `ask`), counted before sending, after dropping the expired
        ones: one round trip (see the module docstring)."""
        pairs = list(pairs)
        groups = self._groups(pairs, ask)
        if not groups:
            return {}
        if not self._one_script():
            return await self._one_by_one(pairs, groups)
        keys, argv = self._script_args(pairs, groups)
        result = await self._run_script(keys, argv)
        return dict(zip(groups, (int(n) for n in result[1:]), strict=True))

    async def group_send_soon(
        self, pairs: Iterable[tuple[str, dict]], replied: Callable[[dict[str, int] | BaseException], None]
    ) -> None:
        """`group_send_many` of a batch that asks nothing, without waiting for Redis' reply where it goes
        on this loop's own connection (`Wires`): written now, so before whatever this loop sends next
        (Redis runs one connection's commands in order), and `replied` is called with the groups'
        counts, or the error, once the reply is in (`sent()` waits for that). Elsewhere (redis-py's
        client) it is awaited, `replied` called before it returns."""
        pairs = list(pairs)
        groups = self._groups(pairs, ())
        if not groups:
            return
        if not self._one_script():
            replied(await self._one_by_one(pairs, groups))
            return
        keys, argv = self._script_args(pairs, groups)
        reply = await self._run_script(keys, argv, wait=False)

        def counted(reply: asyncio.Future[Any]) -> None:
            if reply.cancelled():
                replied(asyncio.CancelledError())
            elif (error := reply.exception()) is not None:
                replied(error)
            else:
                replied(dict(zip(groups, (int(n) for n in reply.result()[1:]), strict=True)))

        if isinstance(reply, asyncio.Future):
            reply.add_done_callback(counted)
        else:
            done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            done.set_result(reply)
            counted(done)

    async def command_soon(self, *args: Any) -> bool:
        """A plain command (a SET) on this loop's connection of the batches (`Wires`), written now, in
        order with them, its reply not waited for (an error reply logged when it comes; `sent()` waits
        for it with the batches'). False where the layer has no such connection (redis-py's client:
        the caller sends it its own way)."""
        wires = self._wired("_wires")
        if wires is None:
            return False
        reply = await wires.call_soon(*args)
        reply.add_done_callback(_logged_if_failed)
        return True

    async def sent(self) -> None:
        """Until the replies of the batches this loop sent without waiting (`group_send_soon`) are in."""
        if self._wires is not None:
            await self._wires.drained()

    def _groups(self, pairs: list[tuple[str, dict]], ask: Iterable[str]) -> dict[str, bytes]:
        """The groups named, each once, in the order first named, and their keys (the script's KEYS)."""
        groups: dict[str, bytes] = {}
        known = self._group_keys
        for group in [g for g, _ in pairs] + list(ask):
            if group not in groups:
                key = known.get(group)
                if key is None:  # checked once: a name's validity and key never change
                    assert self.require_valid_group_name(group), "Group name not valid"  # type: ignore[attr-defined]
                    if len(known) >= GROUP_KEYS_KEPT:
                        known.clear()
                    key = known[group] = self._group_key(group)  # type: ignore[attr-defined]
                groups[group] = key
        return groups

    def _script_args(self, pairs: list[tuple[str, dict]], groups: dict[str, bytes]) -> tuple[list[bytes], list[Any]]:
        """The script's KEYS and ARGV for these pairs (see SCRIPT): each message packed once, however
        many pairs send it (the same dict), each pair with a random prefix of its own."""
        index = {group: n for n, group in enumerate(groups, 1)}
        at: dict[int, int] = {}  # id of a message -> its stored form's place in ARGV (after the 9 first)
        stored: list[bytes] = []
        items: list[int] = []
        for group, message in pairs:
            n = at.get(id(message))  # the pairs hold the messages: no id is reused while this runs
            if n is None:
                stored.append(self._stored_form(message))
                n = at[id(message)] = len(stored)
            items += (index[group], n)
        size = self._serializer.random_prefix_length  # type: ignore[attr-defined]
        now = int(time.time())
        argv: list[Any] = [
            now - self.group_expiry,  # type: ignore[attr-defined]
            now - int(self.expiry),  # type: ignore[attr-defined]
            int(self.expiry),  # type: ignore[attr-defined]
            self.capacity,  # type: ignore[attr-defined]
            self.prefix,  # type: ignore[attr-defined]
            self._first_score(len(pairs)),
            _packer().pack(items),
            random.randbytes(size * len(pairs)),  # channels_redis's prefixes: `random`'s bits
            size,
            *stored,
        ]
        return list(groups.values()), argv

    async def _run_script(self, keys: list[bytes], argv: list[Any], *, wait: bool = True) -> Any:
        """The script's reply (with `wait=False`, where it can, the future of its reply: `Wires`): on a
        connection of this loop's own (`Wires`: no redis-py client on the way), sent whole on a
        connection that has not run it yet; else through redis-py's client (TLS, Sentinel, ...)."""
        wires = self._wired("_wires")
        if wires is not None:
            return await wires.run_script(SHA, SCRIPT, keys, argv, wait=wait)
        connection = self.connection(0)  # type: ignore[attr-defined]
        if self._script is None:
            self._script = connection.register_script(SCRIPT)
        return await self._script(keys=keys, args=argv, client=connection)

    def _wired(self, name: str, at_least: float = 0.0) -> Wires | None:
        """The layer's own connections of that name (adkweb.channel_layers.wire: a bare RESP protocol on
        the loop), where the layer has one Redis and a plain connection to it; else None (redis-py's).
        The one place they are made: the publish script's batches (`_run_script`) and the Redis layer's
        reader and group memberships (adkweb.channel_layers.redis_layer).

        Every message a process receives comes through the reader's pop, and every /run joins and
        leaves its session's group: through redis-py each command cost ~0.3-0.4 ms of the loop's CPU
        (its pool, retry and timeout wrappers, the parser; bench/README.md, phase 16 (publish)), on the
        way from the worker's last publish to the answer and beside the worker on the same cores. The
        reader's pops have connections of their own (`_pop_wires`: a blocking command holds its
        connection), the memberships go on the publish script's (`_wires`)."""
        wires = getattr(self, name, None)
        if wires is None and self.ring_size == 1:  # type: ignore[attr-defined]
            pool = self.connection(0).connection_pool  # type: ignore[attr-defined]
            if Wires.usable(pool):
                wires = Wires(pool, at_least=at_least)
                setattr(self, name, wires)
        return wires

    async def _one_by_one(self, pairs: list[tuple[str, dict]], groups: dict[str, bytes]) -> dict[str, int]:
        counts = {}
        for group in groups:
            connection = self.connection(self.consistent_hash(group))  # type: ignore[attr-defined]
            key = self._group_key(group)  # type: ignore[attr-defined]
            await connection.zremrangebyscore(key, min=0, max=int(time.time()) - self.group_expiry)  # type: ignore[attr-defined]
            counts[group] = await connection.zcard(key)
        for group, message in pairs:
            await self.group_send(group, message)  # type: ignore[attr-defined]
        return counts


def _logged_if_failed(reply: asyncio.Future[Any]) -> None:
    """The reply of a command not waited for (`command_soon`): an error logged (and so retrieved)."""
    if not reply.cancelled() and (error := reply.exception()) is not None:
        logger.warning("A command sent to Redis without waiting failed: %s", error)
