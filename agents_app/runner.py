"""The drain: run a session's inbox of turns under its run lease (one turn: agents_app.turn_exec).

A worker takes the session's lease (agents_app.leases), runs the oldest queued turn with
`Runner.run_async` on `DjangoSessionService`, then the next, until the inbox is empty; a
heartbeat renews the lease meanwhile. Exactly once: see agents_app.turn_exec. Which way the drain's
bookkeeping goes on this database (plain SQL, from the loop or not) is agents_app.drain_paths'.
"""

from __future__ import annotations

import asyncio
import logging
import os

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.db import close_old_connections

from adkweb import gcpolicy, memory_broker, watch_hints

from . import events, session_async, session_sqlite_loop, turn_sql, worker_loop
from .drain_paths import _done_args, _from_loop, _lease_times, _statements
from .leases import Heartbeat, Lease, lease_acquire, lease_release
from .models import Turn
from .turn_exec import (
    NEXT,
    RAN,
    STOP,
    app_and_config_version,
    app_for_run,
    turn_claim_next,
    turn_execute,
    turn_finish,
    turn_plan,
    turn_requeue,
    turn_run,
)

__all__ = [
    "app_and_config_version",
    "app_for_run",
    "session_turns_drain",
    "session_turns_run",
    "turn_claim_next",
    "turn_finish",
    "turn_plan",
    "turn_requeue",
    "turn_run",
]

logger = logging.getLogger(__name__)


def session_turns_run(session_pk: int) -> int:
    """Run every owed turn of one session, oldest first, under its lease; returns how many ran.
    On this thread's long-lived loop (agents_app.worker_loop), its database work on the loop's
    database thread: one thread, one connection checkout, one channel-layer pool per drain. In embedded
    mode the in-process broker's background queues (notifications) wait meanwhile (adkweb.memory_broker)."""
    with memory_broker.foreground():
        return worker_loop.run(_drain(session_pk))


async def session_turns_drain(session_pk: int) -> int:
    """`session_turns_run` on the loop already running (a wake-up's drainer: agents_app.wake_drainers)."""
    return await _drain(session_pk)


async def _drain(session_pk: int) -> int:
    owner = os.urandom(16).hex()  # as random as uuid4().hex, without building a UUID (~8 µs)
    # The drain's publishes, in order, while it goes on (events.TurnPublisher): a turn's events, then
    # its end, which leaves while the next statement runs; sent before the drain returns.
    published = events.turn_publisher.set(events.TurnPublisher())
    calls = worker_loop.db_calls()
    async with ThreadSensitiveContext(executor=worker_loop.db_executor()):
        closed, ran = False, 0
        try:
            if _statements() is not None:
                ran, closed = await _drain_pg(session_pk, owner)
            else:
                ran = await _drain_orm(session_pk, owner)
        finally:
            try:
                # Back to the pool between drains (PostgreSQL: CONN_MAX_AGE 0); SQLite keeps its connection
                # (no pool). Done already where the drain's last statement did it in its own hop; none to
                # give back when the drain gave its database thread nothing (its statements went from the
                # loop, `_astart`, `_adone_next`: the previous drain gave back what it took).
                if not closed and worker_loop.db_calls() != calls:
                    await sync_to_async(close_old_connections)()
            finally:
                await events.publishes_sent()  # on their way meanwhile
                events.turn_publisher.reset(published)
    if ran:  # however the drain was called (a Celery task's `session_turns_run`, a wake-up's drainer)
        gcpolicy.drain_ran()  # a worker's one freeze of what its first turn left (the drain's publishes are out)
    return ran


async def _drain_orm(session_pk: int, owner: str) -> int:
    db = sync_to_async
    ran = 0
    while await db(lease_acquire)(session_pk, owner):
        lease = Lease(session_pk, owner)
        go_on = True
        try:
            with Heartbeat(lease) as heartbeat:
                while go_on and (turn := await _claim_next(session_pk)) is not None:
                    heartbeat.turn_started()
                    ran += 1
                    go_on = await turn_execute(turn, lease) == NEXT
        finally:
            await db(lease_release)(session_pk, owner)
        # A turn queued between our last look and the release would otherwise wait for the sweeper.
        if not go_on or not await db(Turn.owed)(session_pk):
            break
    return ran


async def _drain_pg(session_pk: int, owner: str) -> tuple[int, bool]:
    """As `_drain_orm`, with the lease, the claims and a turn's DONE in one round trip each
    (agents_app.turn_sql): `start` takes the lease and claims, `done_next` finishes the turn, claims
    the next and releases the lease when nothing is owed, under the session row's lock. A turn found
    still running (its worker died), and any turn that does not end DONE, take the ORM path. Also says
    whether its last statement gave the connection back to the pool (`_start`, `_done_next`)."""
    db = sync_to_async
    ran = 0
    while True:
        # "Is a page open?" asked at the loop's next turn, once the claim's statement is on its way (its work
        # done while the statement is out, not before it leaves: events.ask_ahead).
        asyncio.get_running_loop().call_soon(events.ask_ahead, session_pk)
        started, closed = await _astart(session_pk, owner)
        if not started.leased:
            return ran, closed
        lease = Lease(session_pk, owner)
        go_on, released = True, False
        try:
            with Heartbeat(lease) as heartbeat:
                turn, claim = started.turn, started.claim
                if turn is not None:  # on its way while the turn starts; awaited before its end is published
                    events.anotify_session_status_soon(session_pk=session_pk, status="running")
                elif started.orphan:
                    turn = await _claim_next(session_pk)
                publisher = events.turn_publisher.get()
                while go_on and turn is not None:
                    heartbeat.turn_started()
                    ran += 1
                    if publisher is not None:
                        publisher.turn_starts()
                    outcome = await turn_execute(turn, lease, finish_done=False, claim=claim)
                    go_on, claim = outcome != STOP, None
                    if outcome == RAN:
                        if (
                            publisher is not None
                            and publisher.revision is not None
                            # what anotify_turn_ended checks when it runs, asked now too: no task for nobody
                            and not watch_hints.counted_empty_since(
                                events.session_group(session_pk), publisher.started_at
                            )
                        ):
                            # Its end for API followers, behind its events, while the DONE statement runs:
                            # /run answers without waiting for it (events.anotify_turn_ended says why
                            # that holds whatever becomes of the statement, and why skipping it is safe).
                            await events.apublish_in_order(
                                events.anotify_turn_ended,
                                session_pk=session_pk,
                                turn_id=turn.pk,
                                revision=publisher.revision,
                                since=publisher.started_at,
                            )
                        heartbeat.releasing()  # its DONE may release the lease: the keeper's renewal then finds none
                        done, closed = await _adone_next(turn, lease)
                        if not done.leased:
                            lease.lost = True
                            logger.warning("Turn %s: lease lost before it was marked done.", turn.pk)
                            go_on = False
                            break
                        if not done.finished:  # not running any more: the checked path says why
                            await events.publishes_sent()  # its end leaves from there: after its events
                            await db(turn_finish)(turn.pk, Turn.Status.DONE, "", lease, turn.config_version_id)
                        else:
                            # Behind the turn's events; now, without a task, where they have all left and the
                            # drain ends here (it waits for its publishes next), else queued while the next runs.
                            last = done.turn is None and not done.orphan
                            publish = events.apublish_now_or_in_order if last else events.apublish_in_order
                            await publish(
                                events.anotify_turn_done,
                                session_pk=session_pk,
                                turn_id=turn.pk,
                                status=done.status,
                                revision=done.revision,
                            )
                            released = done.released
                            if done.turn is not None or done.orphan or released:
                                turn, claim = done.turn, done.claim
                                if turn is None and done.orphan:
                                    turn = await _claim_next(session_pk)
                                continue
                    turn = await _claim_next(session_pk) if go_on else None
        finally:
            await events.status_sent()
            if not released:
                await db(lease_release)(session_pk, owner)
        if released:
            return ran, closed
        if not go_on or not await db(Turn.owed)(session_pk):
            break
    return ran, False


async def _claim_next(session_pk: int) -> Turn | None:
    """`turn_claim_next` (its "running" status is published from the database thread: after what the
    drain's publisher still has on its way)."""
    await events.publishes_sent()
    return await sync_to_async(turn_claim_next)(session_pk)


async def _astart(session_pk: int, owner: str) -> tuple[turn_sql.Started, bool]:
    """`start` from the loop where it can, else `_start` on the database thread; also whether that
    thread's connection went back to the pool in its hop (the thread path, nothing owed)."""
    if _from_loop():
        now, until = _lease_times()
        try:
            return await turn_sql.astart(session_pk=session_pk, owner=owner, until=until, now=now), False
        except session_async.Busy:  # nothing sent: no connection of the loop's free
            pass
    if session_sqlite_loop.usable():  # SQLite: its transaction on the loop's thread, no hop
        started = session_sqlite_loop.inline(_start, session_pk, owner)
    else:
        started = await sync_to_async(_start)(session_pk, owner)
    return started, not started.leased


async def _adone_next(turn: Turn, lease: Lease) -> tuple[turn_sql.DoneNext, bool]:
    """`done_next` from the loop where it can, else `_done_next` on the database thread; also
    whether that thread's connection went back to the pool in its hop (the thread path, released)."""
    if _from_loop():
        try:
            return await turn_sql.adone_next(**_done_args(turn, lease)), False
        except session_async.Busy:
            pass
    if session_sqlite_loop.usable():  # SQLite: its transaction on the loop's thread, no hop
        await events.publishes_sent()  # the turn's end on its way first: /run's answer does not wait for this
        done = session_sqlite_loop.inline(_done_next, turn, lease)
    else:
        done = await sync_to_async(_done_next)(turn, lease)
    return done, done.released


def _start(session_pk: int, owner: str) -> turn_sql.Started:
    now, until = _lease_times()
    sql = _statements()
    assert sql is not None  # only _drain_pg calls it
    started = sql.start(session_pk=session_pk, owner=owner, until=until, now=now)
    if not started.leased:  # nothing owed (or another worker's): the drain ends, its connection goes back now
        close_old_connections()
    return started


def _done_next(turn: Turn, lease: Lease) -> turn_sql.DoneNext:
    sql = _statements()
    assert sql is not None  # only _drain_pg calls it
    done = sql.done_next(**_done_args(turn, lease))
    if done.released:  # the drain's last statement: its connection back to the pool in this hop, not another
        close_old_connections()
    return done
