"""A queued turn's wake-up for a worker: a Redis push (agents_app.wake) or Celery's task, sent before
the turn's commit where that is safe (wake_before_commit), else after it; and the sweeper's re-enqueue
of owed work. The Turn row is the truth: a lost wake-up delays a turn, never loses it."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from . import eager, wake
from .models import Turn

logger = logging.getLogger("agents_app.services")  # the enqueue's log name, as before the split

SESSION_DRAIN_TASK = wake.SESSION_DRAIN_TASK


def turn_enqueue(session_pk: int) -> None:
    """A queued turn's wake-up: where `wake_before_commit` says so (the session row held by this
    transaction), pushed as the transaction's COMMIT leaves, before its reply is read (`_AtCommit`), or
    just before the commit where the backend cannot; else after the commit."""
    if not wake_before_commit():
        transaction.on_commit(lambda: session_enqueue(session_pk=session_pk), robust=True)
        return
    from adkweb.postgresql.base import on_commit_sent  # PostgreSQL's (wake_before_commit)

    at = _AtCommit(session_pk)
    if not on_commit_sent(at.push, at.done):
        _enqueue_early(session_pk)


class _AtCommit:
    """A turn's wake-up pushed once its transaction's COMMIT is written (`push`), its reply read after
    the commit (`done`): the worker's pop, drain and claim then run during the commit's round trip, not
    in the web's push -> COMMIT window where they took a core from it (bench/README.md, phases 21 and 24
    (queue)). The claim waits on the session row until the commit lands, as for an early wake-up; a
    commit that fails leaves it nothing owed (a rolled-back early wake-up's case), and the push's reply
    is then read by this thread's next push or at its request's end (agents_app.wake.left_read)."""

    def __init__(self, session_pk: int) -> None:
        self.session_pk = session_pk
        self.unread: wake.Unread | None = None

    def push(self) -> None:
        with wake.replies_later() as unread:
            session_enqueue(session_pk=self.session_pk)  # a refused send: logged and relayed (_enqueue_sent)
        self.unread = unread

    def done(self) -> None:
        if self.unread is None:  # the COMMIT went without the step (the push raised): sent now
            session_enqueue(session_pk=self.session_pk)
        elif self.unread.owed:
            _replies_read(self.unread, self.session_pk)


def _enqueue_early(session_pk: int) -> None:
    """The enqueue before the commit; if it raises, once more after the commit (as on_commit's robust
    callback would have logged it): an enqueue's failure never rolls the turn back."""
    try:
        session_enqueue_before_commit(session_pk=session_pk)
    except Exception:
        logger.warning("Early wake-up for session %s failed; sent after the commit.", session_pk, exc_info=True)
        transaction.on_commit(lambda: session_enqueue(session_pk=session_pk), robust=True)


def session_enqueue_before_commit(*, session_pk: int) -> None:
    """session_enqueue for a turn whose transaction is still open (wake_before_commit, a decision's early
    wake-up), raising as it does: the wake-up's push is written now and its reply read after the
    commit (agents_app.wake.replies_later), so that the transaction's next statements (a decision's
    record and chain, the COMMIT) do not wait on Redis's answer; the worker's claim waits on the session
    row all the same. A push Redis refused is sent once more after the commit (session_enqueue's
    relay then, as for any enqueue); a rolled-back transaction's reply is read by this thread's next
    push."""
    with wake.replies_later() as unread:
        session_enqueue(session_pk=session_pk)
    if unread.owed:
        transaction.on_commit(lambda: _replies_read(unread, session_pk), robust=True)


def _replies_read(unread: wake.Unread, session_pk: int) -> None:
    try:
        unread.read()
    except Exception:
        logger.warning("Early wake-up for session %s refused; sent after the commit.", session_pk, exc_info=True)
        session_enqueue(session_pk=session_pk)


def wake_before_commit() -> bool:
    """Whether a new turn's wake-up may leave before its transaction's commit (a message: the worker's
    pop, hand-over and drain set-up then overlap the commit's WAL flush, its claim already waiting on
    the session row when the commit lands; ~1.5 ms of the queue stage, bench/README.md phase 10
    (worker)). Why it is safe is approvals.decisions' "Waking before the commit": the turn's insert
    locked the session row (session_status._now_running writes the row whatever its status, or the
    caller holds it: row_lock_held), the claim's first statement waits on that row, its second sees
    the commit; a rollback leaves it nothing owed. Only with the wake-up list (a Redis push that sends
    no task and holds nothing), on PostgreSQL (SQLite's claim would not wait on our row), with eager
    runs off (agents_app.eager takes the drain into this process after the commit), in the outermost
    atomic block (the commit is the next thing)."""
    if not wake.enabled() or settings.ADKWEB_EAGER_RUN:
        return False
    db = transaction.get_connection()
    return db.vendor == "postgresql" and len(db.atomic_blocks) == 1


def session_enqueue(*, session_pk: int) -> bool:
    """Tell a worker to drain this session's inbox: a wake-up on Redis (agents_app.wake) when
    ADKWEB_WAKE_LIST is on, else Celery's task. A broker failure is logged, not raised: the queued
    Turn row is the truth, the enqueue is retried every second (agents_app.broker) and the sweeper
    re-enqueues owed work. Celery's task is sent by name (routed like `.delay`), so this module and
    agents_app.tasks, which calls it, import no cycle. A `/run` that reserved a drain slot of its own
    web process runs the drain there instead (agents_app.eager): no wake-up then."""
    if eager.run_here(session_pk, _enqueue_sent):
        return True
    return _enqueue_sent(session_pk)


def _enqueue_sent(session_pk: int) -> bool:
    """session_enqueue's wake-up (or Celery task) for a worker."""
    send = _send_wake if wake.enabled() else _send_drain
    try:
        send(session_pk)
        return True
    except Exception:  # broker down: kombu raises OperationalError and friends, redis-py ConnectionError
        logger.warning("Could not enqueue session %s; the sweeper will retry.", session_pk, exc_info=True)
        from .broker import relay_owe

        relay_owe(session_pk, send)  # and every second until the broker takes it
        return False


def _send_wake(session_pk: int) -> None:
    wake.wake(session_pk)


def _send_drain(session_pk: int) -> None:
    from adkweb.celery import app

    app.send_task(SESSION_DRAIN_TASK, args=(session_pk,))


def owed_sessions_enqueue() -> int:
    """Re-enqueue sessions with owed work nobody is doing: queued turns older than a few seconds
    (the enqueue was lost) and sessions whose run lease expired (the worker died)."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.ADKWEB_REQUEUE_AFTER_SECONDS)
    free = Q(session__lease_owner="") | Q(session__lease_expires_at__lt=now)
    owed = (
        Turn.objects.filter(free)
        .filter(Q(status=Turn.Status.QUEUED, created_at__lt=stale) | Q(status=Turn.Status.RUNNING))
        .values_list("session_id", flat=True)
        .distinct()
    )
    count = 0
    for session_pk in list(owed):
        count += _sweep_enqueue(session_pk)
    return count


def _sweep_enqueue(session_pk: int) -> bool:
    """The sweeper's enqueue: always Celery's task, which every worker takes (whatever its pool),
    and which is the fallback for a wake-up lost with the worker that popped it (agents_app.wake)."""
    try:
        _send_drain(session_pk)
        return True
    except Exception:
        logger.warning("Could not enqueue session %s; the next sweep will retry.", session_pk, exc_info=True)
        return False
