"""Sending live updates to Channels groups, from sync code (services, after commit) or async code.

Each app's `events.py` names its groups and typed payloads and calls these; consumers render.
Sends never raise: a live update is a courtesy and the database is the truth (pages catch up when
they reconnect), while the caller has already committed what it announces (a decision answered
500 after it was saved, or a run cut short by a lost streaming chunk, would be worse).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from asgiref.sync import async_to_sync
from channels.consumer import get_handler_name
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from channels.utils import await_many_dispatch

from adkweb import wsframes

logger = logging.getLogger(__name__)


_batch: contextvars.ContextVar[list[tuple[str, dict]] | None] = contextvars.ContextVar(
    "adkweb_live_batch", default=None
)
# Inside a `batched()` block, groups whose watchers were asked ahead (`groups_watched_ahead`): the
# answers, so that the publishers it calls do not each wait on the channel layer for their own.
_ahead: contextvars.ContextVar[dict[str, bool] | None] = contextvars.ContextVar("adkweb_live_ahead", default=None)
# Inside an `abatched()` block, groups to ask about with its next question (`ask_also`).
_also: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("adkweb_live_also", default=None)


# Groups the channel layer last said have members, and since when (monotonic), in this process: every
# count it answers (a batch's sends and questions, adkweb.channel_layers.publish) is noted, a group
# counted empty is dropped. Only ever wrong towards "watched" (a page closed since the last answer):
# a publisher that trusts it renders once for nobody, and the send that follows, counted, corrects it.
SEEN_FOR = 60.0  # seconds an answer "watched" is trusted without a new one
SEEN_MAX = 4096  # groups remembered (the oldest answers go first)
_seen: dict[str, float] = {}
_seen_lock = threading.Lock()  # a worker's drain threads share the process


def _note(counts: Mapping[str, int]) -> None:
    now = time.monotonic()
    with _seen_lock:
        for group, members in counts.items():
            _seen.pop(group, None)
            if members:
                _seen[group] = now  # the newest answers last
        while len(_seen) > SEEN_MAX:
            del _seen[next(iter(_seen))]


def seen_watched(groups: list[str]) -> bool:
    """Whether the channel layer's last answer for any of these groups, in this process and within
    SEEN_FOR seconds, was that it has members (no round trip: see `_seen`). False says nothing: ask
    (`agroups_watched`). A publisher that goes by True must send to every one of `groups`, as if all
    were watched: a group counted empty before may have a member now."""
    since = time.monotonic() - SEEN_FOR
    return any(_seen.get(g, since) > since for g in groups)


def group_send(group: str, message: Mapping[str, object]) -> None:
    """From sync code. Inside `batched()`, kept until the batch ends; otherwise sent now."""
    batch = _batch.get()
    if batch is not None:
        batch.append((group, dict(message)))
        return
    _send_many([(group, dict(message))])


_Started = tuple[list[tuple[str, dict]], contextvars.Token, contextvars.Token, contextvars.Token]


def _batch_start() -> _Started | None:
    """Open a batch (`batched()`, `abatched()`): None inside another one, which sends what is made."""
    if _batch.get() is not None:
        return None
    pairs: list[tuple[str, dict]] = []
    return pairs, _batch.set(pairs), _ahead.set({}), _also.set([])


def _batch_end(started: _Started) -> list[tuple[str, dict]]:
    """Close the batch; its (group, message) pairs, for its opener to send."""
    pairs, token, ahead, also = started
    _batch.reset(token)
    _ahead.reset(ahead)
    _also.reset(also)
    return pairs


def ask_also(groups: list[str]) -> None:
    """Inside `abatched()`: ask about these groups too with the batch's next question
    (`agroups_watched`), and keep the answers for the rest of the batch, so that a publisher called
    later in it that asks about them (a stored event's hooks' announcements, after the event's own
    publish) pays no round trip of its own. Asked after what the batch announces was committed, as
    every question must be. Nothing happens outside a batch, or if the batch asks nothing more."""
    also = _also.get()
    if also is not None:
        also.extend(g for g in groups if g not in also)


@contextmanager
def batched() -> Iterator[None]:
    """Send the `group_send`s made inside (or in a function it decorates) at its end, to all their
    groups at once: one wait on the channel layer rather than one per group; each group's messages
    still leave in the order they were made."""
    started = _batch_start()
    try:
        yield
    finally:
        if started is not None:
            _send_many(_batch_end(started))


def _send_many(pairs: list[tuple[str, dict]]) -> None:
    if not pairs:
        return
    try:
        layer = get_channel_layer()
        if layer is None:
            return
        send_now = getattr(layer, "group_send_now", None)
        if send_now is not None:  # embedded mode's in-memory layer: no event loop to run, no thread
            for group, message in pairs:
                try:
                    send_now(group, message)
                except Exception:
                    logger.warning("Could not publish %s to %s.", message.get("type"), group, exc_info=True)
            return
        async_to_sync(_agroup_send_many)(layer, pairs)
    except Exception:  # the layer cannot even be reached (each send's failure is logged below)
        logger.warning("Could not publish %d live updates; pages catch up when they reconnect.", len(pairs))


async def _agroup_send_many(
    layer: Any, pairs: list[tuple[str, dict]], ask: list[str] | None = None, *, soon: bool = False
) -> set[str]:
    """Send the pairs, each group's in order; of the groups in `ask`, those with members (asked with the
    sends: one round trip on the Redis layer, adkweb.channel_layers.publish; all of them if the
    layer cannot tell, or on an error). `soon`, asking nothing: where the layer can
    (`group_send_soon`), written now and not waited for: in order with whatever this loop sends
    next; the reply's counts noted, or its error logged, when it comes (`apublished` waits for it)."""
    ask = ask or []
    send_soon = getattr(layer, "group_send_soon", None) if soon and not ask else None
    if send_soon is not None:
        try:
            await send_soon(pairs, _replied)
        except Exception:  # Redis down, ...
            logger.warning("Could not publish %d live updates; pages catch up when they reconnect.", len(pairs))
        return set()
    send_many = getattr(layer, "group_send_many", None)
    if send_many is not None:
        try:
            counts = await send_many(pairs, ask)
        except Exception:  # Redis down, ...
            logger.warning("Could not publish %d live updates; pages catch up when they reconnect.", len(pairs))
            return set(ask)
        _note(counts)
        return {g for g in ask if counts.get(g)}
    by_group: dict[str, list[dict]] = {}
    for group, message in pairs:
        by_group.setdefault(group, []).append(message)

    async def in_order(group: str, messages: list[dict]) -> None:
        for message in messages:
            try:
                await layer.group_send(group, message)
            except Exception:  # Redis down, channel full, ...
                logger.warning(
                    "Could not publish %s to %s; pages catch up when they reconnect.", message.get("type"), group
                )

    await asyncio.gather(*(in_order(group, messages) for group, messages in by_group.items()))
    return await _awatched(layer, ask) if ask else set()


def _replied(reply: Mapping[str, int] | BaseException) -> None:
    """The reply of a batch sent without waiting (`_agroup_send_many(soon=True)`)."""
    if isinstance(reply, BaseException):
        logger.warning("Could not publish live updates (%s); pages catch up when they reconnect.", type(reply).__name__)
    else:
        _note(reply)


async def apublished() -> None:
    """Until what this loop sent without waiting (`abatched()`'s sends) has been answered by the
    channel layer: before a publish that leaves by another connection (sync code's, from a thread)
    and must come after it."""
    try:
        layer = get_channel_layer()
        sent = getattr(layer, "sent", None)
        if sent is not None:
            await sent()
    except Exception:  # never raises, as publishing does not
        logger.warning("Could not wait for the live updates on their way.", exc_info=True)


@asynccontextmanager
async def abatched() -> AsyncIterator[None]:
    """`batched()` for async code (an after-commit publisher on a worker's or the server's loop): the
    `agroup_send`s made inside, and the `group_send`s of sync code it calls through `sync_to_async`
    (which carries the batch along), leave at its end, in the order they were made, in one round
    trip on the Redis layer, whose reply is not waited for (`_agroup_send_many(soon=True)`: the
    sends are on the wire, before anything this loop sends after them); an `agroups_watched`
    inside takes what is pending with its question (one round trip for both, waited for: its
    answer is needed), and sync code it calls has its `groups_watched` answered from there."""
    started = _batch_start()
    try:
        yield
    finally:
        pairs = _batch_end(started) if started is not None else []
        if pairs:
            try:
                layer = get_channel_layer()
                if layer is not None:
                    await _agroup_send_many(layer, pairs, soon=True)
            except Exception:
                logger.warning("Could not publish %d live updates; pages catch up when they reconnect.", len(pairs))


def groups_watched(groups: list[str]) -> set[str]:
    """The groups that have members now (all of them if the layer cannot tell, or on an error): a
    publisher renders nothing for nobody. A socket that joins just after still sees what was
    committed before: consumers read what they missed when they connect. Inside `batched()`, the
    groups asked with `groups_watched_ahead` are answered from there (asked after the commit that
    is being announced, which is all the above needs), the others from the layer."""
    known = _ahead.get()
    if known and all(g in known for g in groups):
        return {g for g in groups if known[g]}
    return _groups_watched(groups)


def groups_watched_ahead(groups: list[str]) -> None:
    """Inside `batched()`: ask the layer once for all these groups, for the publishers called next
    (each thread hop to the event loop of an ASGI server waits behind its websockets)."""
    known = _ahead.get()
    if known is None:
        return
    missing = [g for g in groups if g not in known]
    if missing:
        watched = _groups_watched(missing)
        known.update({g: g in watched for g in missing})


def _groups_watched(groups: list[str]) -> set[str]:
    try:
        layer = get_channel_layer()
        if layer is None:
            return set()
        watched_now = getattr(layer, "groups_watched_now", None)
        if watched_now is not None:  # embedded mode's in-memory layer: answered here, no thread
            return watched_now(groups)
        return async_to_sync(_awatched)(layer, groups)
    except Exception:
        return set(groups)


async def agroups_watched(groups: list[str]) -> set[str]:
    """groups_watched from async code (no thread hop). Inside `abatched()`, the sends made so far
    leave with the question, and the answers are kept for the rest of the batch: asked again for
    the same groups (a turn's end: its "finished" and its status), or by sync code called from it
    through `sync_to_async` (`groups_watched`), it answers from there, without a round trip."""
    try:
        layer = get_channel_layer()
        if layer is None:
            return set()
        pairs, known = _batch.get(), _ahead.get()
        if pairs is None or known is None:
            return await _awatched(layer, groups)
        if all(g in known for g in groups):  # asked earlier in this batch (after what it announces)
            return {g for g in groups if known[g]}
        also = _also.get() or []
        asked = groups + [g for g in also if g not in known and g not in groups]  # `ask_also`'s too
        also.clear()
        pending = pairs[:] if hasattr(layer, "group_send_many") else []
        del pairs[: len(pending)]
        watched = await _agroup_send_many(layer, pending, asked)
        known.update({g: g in watched for g in asked})
        return {g for g in groups if g in watched}
    except Exception:
        return set(groups)


async def _awatched(layer: Any, groups: list[str]) -> set[str]:
    send_many = getattr(layer, "group_send_many", None)
    if send_many is not None:  # adkweb's Redis layer: one round trip for all the groups
        counts = await send_many([], groups)
        _note(counts)
        return {g for g in groups if counts.get(g)}
    if hasattr(layer, "_group_key") and hasattr(layer, "consistent_hash"):  # channels_redis
        counts = await asyncio.gather(
            *(layer.connection(layer.consistent_hash(g)).zcard(layer._group_key(g)) for g in groups)
        )
        return {g for g, n in zip(groups, counts, strict=True) if n}
    members = getattr(layer, "groups", None)  # Channels' in-memory layer
    if isinstance(members, dict):
        return {g for g in groups if members.get(g)}
    return set(groups)


async def agroup_send(group: str, message: Mapping[str, object]) -> None:
    """From async code. Inside `abatched()`, kept until the batch ends; otherwise sent now."""
    batch = _batch.get()
    if batch is not None:
        batch.append((group, dict(message)))
        return
    try:
        layer = get_channel_layer()
        if layer is not None:
            await layer.group_send(group, dict(message))
    except Exception:
        logger.warning("Could not publish %s to %s; pages catch up when they reconnect.", message.get("type"), group)


class LiveConsumer(AsyncWebsocketConsumer):
    """The base of adkweb's websocket consumers.

    No thread hop per message. Channels (4.2+) hops to the one thread Django's sync code shares
    (asgiref's thread-sensitive executor) before every message it dispatches, to close stale
    database connections: with 1,000 sockets on a conversation, that was 1,000 hops per published
    fragment, queued on the thread the page's POST (and every view) needs, most of a web process's
    time (bench/README.md). Here a message goes straight to its handler: a handler that forwards a
    fragment touches no database, and one that reads goes through `database_sync_to_async`, which
    closes stale connections itself, before and after, on the thread that uses them. So: no ORM
    calls outside `database_sync_to_async` in these consumers.

    No task per message. Under daphne (a socket that takes frames written at once, adkweb.wsframes)
    and with a channel layer that offers it (adkweb.channel_layers), the channel's messages are
    handed to `frames_now` as the layer's reader receives them, when nothing of this consumer's is
    queued or being handled: a consumer that can answer without awaiting anything (a fragment
    rendered once per audience, forwarded) writes its frames in that call. Channels' dispatch loop
    (two tasks and an `asyncio.wait` per message, then the handler) was most of what a web process
    spent per socket per message once the frames were shared. What `frames_now` declines (None:
    it needs the database, or a frame must go through ASGI) is queued and goes through the
    consumer's async handler as before, and everything after it waits behind it: one order."""

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        """Channels' AsyncConsumer.__call__, with each message counted from the moment it is received
        until it is handled (`_handling`), and the channel's messages offered to `_take` first where
        the socket and the layer allow it."""
        self.scope = scope
        self._handling = 0
        self._failed: BaseException | None = None
        self.base_send = send
        self.channel_layer = get_channel_layer(self.channel_layer_alias)
        if self.channel_layer is None:
            sources = [self._counted(receive)]
            direct = False
        else:
            self.channel_name = await self.channel_layer.new_channel()
            self.channel_receive = self._counted(functools.partial(self.channel_layer.receive, self.channel_name))
            sources = [self._counted(receive), self.channel_receive]
            direct = scope.get(wsframes.SCOPE_KEY) is not None and hasattr(self.channel_layer, "deliver_directly")
        if direct:
            self.channel_layer.deliver_directly(self.channel_name, self._take)
        try:
            await await_many_dispatch(sources, self.dispatch)
        except StopConsumer:
            pass
        finally:
            if direct:
                self.channel_layer.stop_delivering_directly(self.channel_name)

    def _counted(self, receive: Callable[[], Awaitable[dict]]) -> Callable[[], Awaitable[dict]]:
        async def counted() -> dict:
            message = await receive()
            self._handling += 1  # in the step that took it from its queue: nothing overtakes it
            return message

        return counted

    async def dispatch(self, message: dict) -> None:
        try:
            if self._failed is not None:
                raise self._failed  # `frames_now` failed: the consumer ends as a failed handler ends it
            handler = getattr(self, get_handler_name(message), None)
            if handler is None:
                raise ValueError(f"No handler for message type {message['type']}")
            await handler(message)
        finally:
            if self._handling > 0:
                self._handling -= 1

    def _take(self, message: dict) -> bool:
        """The channel layer's direct delivery: True if the message was handled here and now."""
        if self._handling or self._failed is not None:
            return False  # something before it is queued or being handled
        writer = self.scope.get(wsframes.SCOPE_KEY)
        if writer is None or not writer.ready():
            return False  # not open yet, or closing: through ASGI
        try:
            frames = self.frames_now(message)
        except Exception as exc:
            self._failed = exc
            return False
        if frames is None:
            return False
        if frames:
            writer.write(*frames)
        return True

    def frames_now(self, message: dict) -> list[str] | None:
        """The frames a channel message makes when it can be handled without awaiting anything (the
        consumer's state updated as its handler would), or None, having changed nothing: the message
        then goes to its async handler, in order. Subclasses that forward fragments override this."""
        return None

    async def send_frame(self, text: str) -> None:
        """Send a text frame: under daphne, framed once per process for every socket that sends the
        same text (adkweb.wsframes); elsewhere through ASGI."""
        writer = self.scope.get(wsframes.SCOPE_KEY)
        if writer is None or not writer.write(text):
            await self.send(text_data=text)


LAYER_DOWN = 1011  # websocket close code "server error": clients (htmx's ws extension) reconnect later


async def join(consumer: Any, group: str) -> bool:
    """Join a group and accept the socket. If the channel layer is down, accept and close with
    1011 (try again later) instead of failing the handshake with a 500; False then."""
    try:
        await consumer.channel_layer.group_add(group, consumer.channel_name)
    except Exception:
        logger.warning("Could not join %s: the channel layer is down; the socket is closed, to retry.", group)
        await consumer.accept()
        await consumer.close(code=LAYER_DOWN)
        return False
    await consumer.accept()
    return True


async def leave(consumer: Any, group: str) -> None:
    try:
        await consumer.channel_layer.group_discard(group, consumer.channel_name)
    except Exception:  # the layer is down: its group memberships expire on their own
        logger.warning("Could not leave %s: the channel layer is down.", group)
