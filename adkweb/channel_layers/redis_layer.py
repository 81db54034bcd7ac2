"""channels_redis's layer with one reader per process and a process's group memberships kept in its
memory (services mode): a group message reaches a web process once, whatever its number of sockets.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import time
from typing import Any

import channels_redis.core
from channels.exceptions import ChannelFull

from .cancel_safe import cancel_safe
from .direct import DirectDelivery, receivers_copy
from .publish import BatchPublisher

__all__ = ["RedisChannelLayer", "cancel_safe"]  # cancel_safe's (adkweb.channel_layers.cancel_safe), as before the split


class _Failed:
    """Put in a waiting consumer's queue when the reader failed (Redis down): its receive raises."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class RedisChannelLayer(DirectDelivery, BatchPublisher, channels_redis.core.RedisChannelLayer):
    """channels_redis's layer, with a process's channels (every websocket consumer's) received by one
    reader and grouped in this process's memory.

    Receive. With channels_redis each waiting consumer raced the others for a receive lock on every
    message the process got: two new tasks, a wait and a cancellation per consumer per message, and
    a new queue each time (about a third of a web process's time with 1,000 sockets on one
    conversation, bench/README.md). Here one reader task per process pops the process's messages
    from Redis (the same `receive_single`: backup queue, cleaners) and puts each into the queue of
    every channel it is for, in the order popped; a consumer's receive waits on its own queue only.
    The reader runs while someone waits; a failure (Redis down) is raised in every waiting receive,
    as channels_redis does, and the next receive starts a new reader.

    Groups. A group's members in Redis are one channel per process (`specific.<this process>!g<n>`),
    not one per consumer: this process keeps which of its channels are in the group, in memory, and
    the reader hands the group's message to each of them. So a `group_send` to 1,000 sockets on one
    web process sends Redis one message naming one channel (channels_redis's named all 1,000, and
    the group's sorted set held 1,000 names for every sender to read), and the process decodes it
    once. The process's member is added with the first of its channels to join (every join renews
    its time, for `group_expiry`) and removed with the last to leave; each local membership expires
    `group_expiry` after its own join, as in Redis. Another process's channel (or a channel without
    `!`) joins the group in Redis itself, as channels_redis does. Messages of one group reach a
    process in the order they were sent; a channel that joins gets what the process reads after it
    joined (a message sent just before may still reach it: consumers read their state after joining
    and ignore what they already have)."""

    BURST = 64  # messages one pop takes at most

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._queues: dict[str, asyncio.Queue] = {}
        self._waiting: set[str] = set()
        self._reader: asyncio.Task | None = None
        self._local: dict[str, dict[str, float]] = {}  # group -> this process's channels in it -> joined at
        self._member_of: dict[str, str] = {}  # group -> this process's member channel in Redis
        self._group_of: dict[str, str] = {}  # that member -> group
        self._members = itertools.count(1)
        self._group_locks = channels_redis.core.ChannelLock()
        self._direct = {}

    def create_pool(self, index: int) -> Any:
        pool = super().create_pool(index)
        pool.connection_class = cancel_safe(pool.connection_class)  # see adkweb.channel_layers.cancel_safe
        return pool

    # -- receive ----------------------------------------------------------------------------------
    async def receive(self, channel: str) -> dict:
        if "!" not in channel:
            return await super().receive(channel)
        assert self.require_valid_channel_name(channel)
        queue = self._queue(channel)
        if queue.empty():
            self._waiting.add(channel)
            try:
                self._start_reader(self.non_local_name(channel))
                item = await queue.get()
            except asyncio.CancelledError:
                self._waiting.discard(channel)
                self._queues.pop(channel, None)  # its consumer is gone
                if not self._waiting and self._reader is not None:
                    self._reader.cancel()  # nobody receives: stop popping (nothing is lost: backup queue)
                    self._reader = None  # the next receive starts a new one
                raise
            self._waiting.discard(channel)
        else:
            item = queue.get_nowait()
        if isinstance(item, _Failed):
            raise item.exc
        return item

    async def send(self, channel: str, message: dict) -> None:
        """A message for a channel this process is receiving on (its queue is here) goes into that
        queue at once: through Redis it cost four round trips (channels_redis's send) and a pop to
        come back to this same process (a `/run` request ends its watch this way, adkweb.api.watch).
        Any other channel (another process's, or ours before anyone receives on it) goes through
        Redis. Messages of different senders keep no order between them, in Redis or here."""
        queue = self._queues.get(channel) if "!" in channel and self._ours(channel) else None
        if queue is None:
            return await super().send(channel, message)
        assert isinstance(message, dict), "message is not a dict"
        assert self.require_valid_channel_name(channel), "Channel name not valid"
        if queue.full():
            raise ChannelFull(channel)
        self._put(channel, receivers_copy(message))  # the receiver's own copy, as a trip through Redis gives

    def _queue(self, channel: str) -> asyncio.Queue:
        queue = self._queues.get(channel)
        if queue is None:
            queue = self._queues[channel] = channels_redis.core.BoundedQueue(self.capacity)
        return queue

    def _start_reader(self, real_channel: str) -> None:
        loop = asyncio.get_running_loop()
        reader = self._reader
        if reader is None or reader.done() or reader.get_loop() is not loop:
            # The process's reader, not the request's or socket's that happened to start it: a
            # context of its own (a request's ends with the request, adkweb.handler).
            self._reader = loop.create_task(self._read(real_channel), context=contextvars.Context())

    async def _pop(self, index: int, key: str) -> list[bytes]:
        """One blocking pop of up to BURST of the process's messages, oldest first (none when it timed
        out): not once more for a task asked to stop. A reader cancelled as its loop ended (a
        request's, under Django's test client and `async_to_sync`) was seen to go on popping, its
        cancellation lost below (by Python 3.11's `wait_for` in redis-py's write: `cancel_safe`
        delivers it now), so `asyncio.run` waited for it for ever (the integration suite hung there)."""
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise asyncio.CancelledError
        wires = self._wired("_pop_wires", at_least=self.brpop_timeout + 5.0)
        if wires is None:
            popped = await self.connection(index).bzmpop(self.brpop_timeout, 1, [key], min=True, count=self.BURST)
        else:
            popped = await wires.blocking("BZMPOP", self.brpop_timeout, 1, key, "MIN", "COUNT", self.BURST)
        return [] if popped is None else [member for member, _score in popped[1]]

    async def _read(self, real_channel: str) -> None:
        """Pop the process's messages and hand each out as it comes, in the order popped.

        One round trip per burst: BZMPOP takes what is waiting (up to BURST, oldest first: a
        publisher's batch, adkweb.channel_layers.publish, arrives at once), BZPOPMIN took one
        message per round trip. channels_redis's `receive_single` made four per message and held a
        lock across them: a script restoring the channel's backup queue, the pop, a copy of the
        message into the backup queue, and a task removing it again once received. The backup keeps
        a message whose receive was cancelled between the pop and its return; here nothing awaits
        between the pop's reply and the hand-out (direct delivery or the consumers' queues, all in
        this process's memory), so it would protect nothing. A cancel landing while the pop's reply
        is on its way loses what it popped with either, and a process that dies loses what it held
        in memory with either (its channel dies with it)."""
        index = self.consistent_hash(real_channel)
        key = self.prefix + real_channel
        try:
            while self._waiting:
                for content in await self._pop(index, key):  # nothing popped: the pop timed out
                    self._hand_out(real_channel, self.deserialize(content))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - handed to the consumers waiting, as channels_redis does
            for channel in list(self._waiting):
                self._queue(channel).put_nowait(_Failed(exc))

    def _hand_out(self, real_channel: str, message: dict) -> None:
        """A popped message to the channels (or the groups' local channels) it names."""
        to = message.pop("__asgi_channel__", real_channel)
        for channel in to if isinstance(to, list) else [to]:
            group = self._group_of.get(channel)
            if group is not None:
                self._deliver(group, message)
            elif not self._is_member_name(channel):
                self._put(channel, message)
            # else: a member this process no longer has (its removal from Redis failed): dropped

    def _deliver(self, group: str, message: dict) -> None:
        """A group's message to this process's channels in it (one dict for all: consumers read it)."""
        members = self._local.get(group)
        if not members:
            return
        expired = time.time() - self.group_expiry
        for channel, joined in list(members.items()):
            if joined < expired:
                del members[channel]  # as channels_redis drops an expired member at a group_send
            else:
                self._put(channel, message)

    def _put(self, channel: str, message: dict) -> None:
        """To the channel's direct handler if it takes it, else into its queue."""
        if not self._taken(channel, message, self._queues.get(channel)):
            self._queue(channel).put_nowait(message)

    # -- groups -----------------------------------------------------------------------------------
    def _ours(self, channel: str) -> bool:
        return "!" in channel and self.non_local_name(channel).endswith(f".{self.client_prefix}!")

    def _is_member_name(self, channel: str) -> bool:
        """A name this process gives its members (`!g<n>`; its own channels end in a uuid's hex)."""
        return channel.rpartition("!")[2].startswith("g")

    async def _lock(self, group: str) -> None:
        """Take the group's membership lock; a cancelled wait gives its place back (ChannelLock counts
        waiters and would otherwise keep the group's lock forever)."""
        try:
            await self._group_locks.acquire(group)
        except asyncio.CancelledError:
            self._group_locks.wait_counts[group] -= 1
            if self._group_locks.wait_counts[group] < 1 and not self._group_locks.locked(group):
                del self._group_locks.locks[group]
                del self._group_locks.wait_counts[group]
            raise

    async def group_add(self, group: str, channel: str) -> None:
        if not self._ours(channel):
            return await super().group_add(group, channel)
        assert self.require_valid_group_name(group), "Group name not valid"
        assert self.require_valid_channel_name(channel), "Channel name not valid"
        await self._lock(group)
        try:
            member = self._member_of.get(group)
            if member is None:
                member = f"specific.{self.client_prefix}!g{next(self._members)}"
                self._member_of[group], self._group_of[member] = member, group
            self._local.setdefault(group, {})[channel] = time.time()
            try:
                await self._member_add(group, member)  # added, or its time renewed
            except BaseException:
                self._leave_locally(group, channel)
                raise
        finally:
            self._group_locks.release(group)

    async def _member_add(self, group: str, member: str) -> None:
        """channels_redis's group_add (the member with its join time, the group's expiry renewed) in
        one round trip instead of two."""
        group_key = self._group_key(group)
        wires = self._wired("_wires")
        if wires is not None:
            await wires.call_all(
                ("ZADD", group_key, repr(time.time()), member), ("EXPIRE", group_key, self.group_expiry)
            )
            return
        pipe = self.connection(self.consistent_hash(group)).pipeline(transaction=False)
        pipe.zadd(group_key, {member: time.time()})
        pipe.expire(group_key, self.group_expiry)
        await pipe.execute()

    async def group_discard(self, group: str, channel: str) -> None:
        if not self._ours(channel):
            return await super().group_discard(group, channel)
        assert self.require_valid_group_name(group), "Group name not valid"
        assert self.require_valid_channel_name(channel), "Channel name not valid"
        await self._lock(group)
        try:
            member = self._leave_locally(group, channel)
            wires = self._wired("_wires")
            if member is not None and wires is not None:  # channels_redis's ZREM, without redis-py
                await wires.call_all(("ZREM", self._group_key(group), member))
            elif member is not None:  # the last of this process's channels in the group left
                await super().group_discard(group, member)
        finally:
            self._group_locks.release(group)

    def _leave_locally(self, group: str, channel: str) -> str | None:
        """Drop a local membership; the process's member channel if it was the group's last one."""
        members = self._local.get(group)
        if members is None:
            return None
        members.pop(channel, None)
        if members:
            return None
        del self._local[group]
        member = self._member_of.pop(group)
        del self._group_of[member]
        return member

    def local_members(self, group: str) -> set[str]:
        """This process's channels in a group (for tests and diagnostics)."""
        return set(self._local.get(group, ()))

    async def flush(self) -> None:
        await super().flush()
        self._local.clear()
        self._member_of.clear()
        self._group_of.clear()
