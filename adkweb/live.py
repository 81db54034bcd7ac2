"""Sending live updates to Channels groups, from sync code (services, after commit) or async code.

Each app's `events.py` names its groups and typed payloads and calls these; consumers
(adkweb.live_socket.LiveConsumer) render or forward.
Sends never raise: a live update is a courtesy and the database is the truth (pages catch up when
they reconnect), while the caller has already committed what it announces (a decision answered
500 after it was saved, or a run cut short by a lost streaming chunk, would be worse).
A batch's state is adkweb.live_batch's, what a layer says of who watches adkweb.live_counts'
(imported back here).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from adkweb.watch_hints import note

from .live_batch import _ahead, _also, _batch, _batch_end, _batch_start, _Started, ask_also
from .live_counts import _awatched, _replied

__all__ = ["ask_also"]  # adkweb.live_batch's, imported from here (agents_app.session_service)

logger = logging.getLogger(__name__)


def group_send(group: str, message: Mapping[str, object]) -> None:
    """From sync code. Inside `batched()`, kept until the batch ends; otherwise sent now."""
    group_send_each([group], message)


def group_send_each(groups: list[str], message: Mapping[str, object]) -> None:
    """`group_send(group, message)` for each of these groups, in this order, with one copy of the
    message for all of them (see `agroup_send_each`); outside `batched()`, a batch of its own."""
    copy = dict(message)
    batch = _batch.get()
    if batch is not None:
        batch += [(group, copy) for group in groups]
    else:
        _send_many([(group, copy) for group in groups])


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
        sent_at = time.monotonic()  # Redis counts the batch's groups after this moment
        try:
            await send_soon(pairs, lambda reply: _replied(reply, sent_at))
        except Exception:  # Redis down, ...
            logger.warning("Could not publish %d live updates; pages catch up when they reconnect.", len(pairs))
        return set()
    send_many = getattr(layer, "group_send_many", None)
    if send_many is not None:
        sent_at = time.monotonic()
        try:
            counts = await send_many(pairs, ask)
        except Exception:  # Redis down, ...
            logger.warning("Could not publish %d live updates; pages catch up when they reconnect.", len(pairs))
            return set(ask)
        note(counts, sent_at)
        return {g for g in ask if counts.get(g)}
    if hasattr(layer, "group_send_now"):  # embedded mode's in-memory layer: each send done in its call, awaited
        for group, message in pairs:  # in turn rather than a task per group (and a turn of the loop each)
            try:
                await layer.group_send(group, message)
            except Exception:  # channel full, ...
                logger.warning("Could not publish %s to %s.", message.get("type"), group, exc_info=True)
        return await _awatched(layer, ask) if ask else set()
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


class abatched:  # noqa: N801 - used as `async with abatched()` and `@abatched()`, as a context manager is
    """`batched()` for async code (an after-commit publisher on a worker's or the server's loop): the
    `agroup_send`s made inside, and the `group_send`s of sync code it calls through `sync_to_async`
    (which carries the batch along), leave at its end, in the order they were made, in one round
    trip on the Redis layer, whose reply is not waited for (`_agroup_send_many(soon=True)`: the
    sends are on the wire, before anything this loop sends after them); an `agroups_watched`
    inside takes what is pending with its question (one round trip for both, waited for: its
    answer is needed), and sync code it calls has its `groups_watched` answered from there.

    Inside another batch it does nothing (that batch sends what is made): a turn's end nests three.
    A class rather than an `asynccontextmanager`, whose generator and decorator wrapping cost each
    publish of a turn a dozen calls more (bench/README.md, phase 18 (publish))."""

    __slots__ = ("_started",)

    def __init__(self) -> None:
        self._started: _Started | None = None

    async def __aenter__(self) -> None:
        self._started = _batch_start()

    async def __aexit__(self, *exc: object) -> None:
        started, self._started = self._started, None
        if started is not None:
            await _abatch_send(_batch_end(started))

    def __call__(self, func: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        """As a decorator: `func` runs in a batch of its own, or in its caller's."""

        @functools.wraps(func)
        async def in_a_batch(*args: Any, **kwargs: Any) -> Any:
            started = _batch_start()
            if started is None:  # inside a batch already: it sends what is made
                return await func(*args, **kwargs)
            try:
                return await func(*args, **kwargs)
            finally:
                await _abatch_send(_batch_end(started))

        return in_a_batch


async def _abatch_send(pairs: list[tuple[str, dict]]) -> None:
    """What an `abatched()` made, sent at its end (never raising)."""
    if pairs:
        try:
            layer = get_channel_layer()
            if layer is not None:
                await _agroup_send_many(layer, pairs, soon=True)
        except Exception:
            logger.warning("Could not publish %d live updates; pages catch up when they reconnect.", len(pairs))


async def acommand_soon(*args: Any) -> bool:
    """A Redis command (a SET) written on the channel layer's connection of this loop's batches, in order
    with them, not waited for (`apublished` waits for its reply with theirs; an error is logged). False
    where the layer has none (the in-memory layer, redis-py's client): the caller sends it its own way."""
    try:
        command_soon = getattr(get_channel_layer(), "command_soon", None)
        return command_soon is not None and bool(await command_soon(*args))
    except Exception:  # Redis down: the caller's own way says so
        return False


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


async def agroup_send_each(groups: list[str], message: Mapping[str, object]) -> None:
    """`agroup_send(group, message)` for each of these groups, in this order, with one copy of the
    message for all of them: inside `abatched()` the Redis layer then packs it once for the batch
    (adkweb.channel_layers.publish: each group's copy keeps a random prefix of its own)."""
    copy = dict(message)
    batch = _batch.get()
    if batch is not None:
        batch += [(group, copy) for group in groups]
    else:  # a batch of its own
        await _abatch_send([(group, copy) for group in groups])
