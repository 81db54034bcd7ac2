"""Waking a worker for a session at once, without Celery's message on the hot path.

After a turn's commit the web pushes the session's id to a Redis list (`wake`: one RPUSH); in every
`celery worker` process that takes the drain task's queue, one of its drainer threads
(agents_app.wake_drainers, started and stopped with the worker by its bootstep in
agents_app.wake_worker) blocks on that list (BLPOP) and runs the drain of each id it pops at once on
its own loop (agents_app.worker_loop), as Celery's task would on a pool thread's. Celery's publish,
its consumer and its dispatch cost ~2 ms of wall time and ~1 ms of the web's and ~4 ms of the
worker's CPU per turn; the push and the pop cost one round trip each (bench/README.md, phase "wake").

Durability is unchanged: the Turn row is the truth. A wake-up popped by a worker that dies before
its drain claims the turn is lost, and so was Celery's message then (delivered again only after
Redis' visibility timeout, an hour): the sweeper (`turns_requeue_owed`) sends owed work through
Celery's task, which every worker takes, after ADKWEB_REQUEUE_AFTER_SECONDS. Two workers woken for
one session: the lease lets one run. A wake-up sent while no worker listens stays in the list for
the next one, up to `KEEP` of them: a deployment whose workers do not listen (another pool than
threads) would otherwise grow the list by one entry a turn for ever; past `KEEP` the oldest go, and
their turns (if still owed) come back through the sweeper as a lost wake-up's do. A drainer pops
only while the process has a free drain slot (`wake_drainers.Slots`: drains from wake-ups and from
Celery's task counted together, at most the pool's concurrency), so a wake-up is not taken by a busy
worker while another is idle. At a warm shutdown the drainers stop popping, a wake-up popped
meanwhile is pushed back to the list's head, and the worker waits for the running drains.

ADKWEB_WAKE_LIST (on in services mode) turns it on for the web's enqueue, the workers' drainers
follow it; off, or in embedded mode (no Redis), every enqueue is Celery's task as before. The
drainers need Celery's threads pool (production's); a worker on another pool says so in its log
and takes Celery's tasks only.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings

from adkweb.channel_layers.resp import pack
from adkweb.per_process import PerProcess

logger = logging.getLogger(__name__)

KEY_PREFIX = "adkweb:wake:"
# Wake-ups a list keeps while nobody pops them (the newest): a listening worker keeps it near empty.
KEEP = 10_000
SESSION_DRAIN_TASK = "agents_app.tasks.session_drain"


def enabled() -> bool:
    return bool(settings.ADKWEB_WAKE_LIST and settings.REDIS_URL)


def key(app: Any = None) -> str:
    """The list of the drain task's queue (as Celery routes it), so that a worker listens to the
    wake-ups of the queue it consumes (and a bench's private queue has a private list)."""
    if app is not None:
        return KEY_PREFIX + app.amqp.router.route({}, SESSION_DRAIN_TASK)["queue"].name
    if not _key:  # Celery's routing, its settings' lookup and the import: ~50 µs after an idle gap, once
        from adkweb.celery import app as default

        _key.append(key(default))
    return _key[0]


# The process's list (adkweb.celery's app), routed at its first wake-up: a process that routes its drain
# task elsewhere (a bench's private queue, bench/turn_path_worker.py) sets its task_routes before that.
_key: list[str] = []


def client() -> Any:
    """This process's Redis client for wake-ups (its connection pool is thread-safe; a forked child
    makes its own)."""
    return _clients.get()


def _new_client() -> Any:
    import redis

    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=2)


_clients: PerProcess[Any] = PerProcess(_new_client)


def wake(session_pk: int) -> None:
    """Wake a worker for this session (raises when Redis refuses: the caller retries). The push and
    the list's trim to its newest `KEEP` go in one round trip. Inside `replies_later()`, they are
    written and their replies left to read later (`Unread.read`)."""
    unread = _unread.get()
    if unread is not None:
        unread.push(session_pk)
        return
    name = key()
    pipe = client().pipeline(transaction=False)
    pipe.rpush(name, session_pk)
    pipe.ltrim(name, -KEEP, -1)
    pipe.execute()


class Unread:
    """Wake-ups pushed whose replies are not read yet: the caller goes on (a decision's record, its
    commit) while Redis answers, and reads them later (`read`). A push that is never read (its
    transaction rolled back before the commit hook that reads it) is read at its request's end
    (`left_read`) or, outside a request, by this thread's next push. The pushes go on the thread's own
    connection (`_thread_connection`), packed here (`_packed`)."""

    def __init__(self) -> None:
        self.pushed: list[Any] = []  # the connection of each push whose replies are owed
        self.failed: BaseException | None = None  # a refusal read by another push (`collect`), not raised yet

    @property
    def owed(self) -> bool:
        """Replies to read, or a refusal already read, for `read` to raise."""
        return bool(self.pushed) or self.failed is not None

    def push(self, session_pk: int) -> None:
        pending = getattr(_left, "pending", None)
        if pending is not None:  # nothing owed on the thread's connection from here on
            pending.collect()
        conn = _thread_connection()
        command = [_packed(key(), session_pk)]
        was_open = conn.is_connected  # else this send connects: a failure there is not a stale connection's
        try:
            conn.send_packed_command(command)
        except Exception as exc:
            from redis.exceptions import ConnectionError as Lost
            from redis.exceptions import TimeoutError as Late

            if not was_open or not isinstance(exc, (OSError, Lost, Late)):
                raise
            # A connection Redis closed (a restart) is found here, not by a check before each push:
            # redis-py dropped it; this send connects again (an error there is the caller's).
            conn.send_packed_command(command)
        self.pushed.append(conn)
        _left.pending = self

    def read(self) -> None:
        """Every push's reply (raises as `wake` would have, once all are read: the caller sends again)."""
        self.collect()
        failed, self.failed = self.failed, None
        if failed is not None:
            raise failed

    def collect(self) -> None:
        """Every push's reply read; a refusal kept (`failed`) for `read` to raise: read by another push (the
        thread's next, which may be of the same transaction: two turns woken at one COMMIT), it is still its
        owner's to send again after the commit."""
        if getattr(_left, "pending", None) is self:
            _left.pending = None
        pushed, self.pushed = self.pushed, []
        for conn in pushed:
            try:
                for _ in range(2):  # RPUSH's, LTRIM's
                    conn.read_response()
            except BaseException as exc:
                self.failed = self.failed or exc
                conn.disconnect()  # no reply left unread on it for its next push (which connects again)


_own = threading.local()  # .conn, .pool: this thread's connection for its pushes, made from that pool's settings


def _thread_connection() -> Any:
    """This thread's Redis connection for its wake-ups' pushes, outside the client's pool: what it owes
    is read before its next push (`Unread`), so the pool's checkout, with its poll of the socket for data
    left unread and its counters, ~0.1-0.17 ms after an idle gap on the wake-up's way, is not needed
    (bench/README.md, phase 26 (queue)). Made again for another client (a forked child's, a test's);
    closed when its thread ends."""
    pool = client().connection_pool
    conn = getattr(_own, "conn", None)
    if conn is None or _own.pool is not pool:
        conn = _own.conn = pool.connection_class(**pool.connection_kwargs)
        _own.pool = pool
    return conn


def _packed(name: str, session_pk: int) -> bytes:
    """RPUSH name session_pk and LTRIM name -KEEP -1 as Redis reads them (adkweb.channel_layers.resp's
    packer, which the channel layer's wire uses), where redis-py's packer took ~50 us after an idle gap."""
    return pack("RPUSH", name, session_pk) + pack("LTRIM", name, -KEEP, -1)


_unread: contextvars.ContextVar[Unread | None] = contextvars.ContextVar("adkweb_wake_unread", default=None)
_left = threading.local()  # .pending: this thread's Unread whose replies no commit read (a rollback)


def left_read(**_: Any) -> None:
    """Django's request_finished receiver (agents_app.apps), on the request's thread: a push whose
    transaction rolled back in this request has its reply read now, not by the thread's next push. A
    request's thread may never push again (adkweb.handler ends threads beyond its idle few; a test's
    threads end): its connection would stay checked out of the pool, its reply unread, for good."""
    _left_read()


def _left_read() -> None:
    pending = getattr(_left, "pending", None)
    if pending is not None:
        try:
            pending.read()
        except Exception:
            logger.warning("A wake-up of a rolled-back transaction was refused.", exc_info=True)


@contextmanager
def replies_later() -> Iterator[Unread]:
    """`wake`s inside write their pushes and leave the replies unread: the caller reads them with the
    `Unread` it is given."""
    unread = Unread()
    token = _unread.set(unread)
    try:
        yield unread
    finally:
        _unread.reset(token)
