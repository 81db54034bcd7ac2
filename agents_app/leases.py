"""The per-session run lease: one agent run at a time per session, across every worker process.

A drain takes the lease with an atomic UPDATE (it holds across processes, on SQLite and
PostgreSQL), the process's lease keeper thread renews it every ADKWEB_LEASE_RENEW_SECONDS while a
turn runs, and every stored event checks it on the locked session row (see DjangoSessionService). A worker
that dies stops renewing, so its lease runs out within ADKWEB_SESSION_LEASE_SECONDS and the
sweeper hands the session to another worker. A worker that was paused past its lease finds
another owner on its next write and stops (LeaseLost) before storing anything more.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from adkweb.per_process import PerProcess

from .models import AdkSession

logger = logging.getLogger(__name__)


class LeaseLost(RuntimeError):
    """Another worker owns this session's run now: stop without storing anything more."""


@dataclass
class Lease:
    """A drain's hold on one session; `lost` is set by the heartbeat when renewal finds another owner."""

    session_pk: int
    owner: str
    lost: bool = field(default=False)

    def check(self) -> None:
        if self.lost:
            raise LeaseLost(f"The run lease of session {self.session_pk} was taken over by another worker.")

    def expiry(self) -> datetime:
        return timezone.now() + timedelta(seconds=settings.ADKWEB_SESSION_LEASE_SECONDS)


# The lease of the run that is storing events in this context (set by the runner).
#
# A lease is taken, renewed and released on the session row whether or not the session was deleted
# (archived: `all_objects`): the drain that closes a deleted session's owed turns
# (turn_close.turn_claim_next) takes it and gives it back. Read through `objects`, an archived row's
# lease was nobody's: its release did nothing (the lease ran out) and a close found it lost (LeaseLost).
current_lease: contextvars.ContextVar[Lease | None] = contextvars.ContextVar("current_lease", default=None)


def lease_acquire(session_pk: int, owner: str) -> bool:
    now = timezone.now()
    free = Q(lease_owner="") | Q(lease_expires_at__lt=now) | Q(lease_owner=owner)
    until = now + timedelta(seconds=settings.ADKWEB_SESSION_LEASE_SECONDS)
    return AdkSession.all_objects.filter(free, pk=session_pk).update(lease_owner=owner, lease_expires_at=until) == 1


def lease_renew(lease: Lease) -> bool:
    """Extend a lease we still own; False if another worker owns it now."""
    rows = AdkSession.all_objects.filter(pk=lease.session_pk, lease_owner=lease.owner)
    return rows.update(lease_expires_at=lease.expiry()) == 1


def lease_release(session_pk: int, owner: str) -> None:
    AdkSession.all_objects.filter(pk=session_pk, lease_owner=owner).update(lease_owner="", lease_expires_at=None)


class Heartbeat:
    """Keeps a drain's lease renewed every ADKWEB_LEASE_RENEW_SECONDS until stopped, until renewal
    finds another owner, or until the turn passes its hard time limit: then renewal stops, so a stuck
    run's session goes to another worker when the lease runs out. Renewed by the process's one lease
    keeper thread (`_Keeper`), not by the drain's loop: a tool that blocks the event loop does not
    stop it, and a dead (or stopped) process renews nothing."""

    def __init__(self, lease: Lease) -> None:
        self.lease = lease
        self._deadline = time.monotonic() + settings.ADKWEB_TURN_HARD_TIME_LIMIT
        # The drain may release the lease itself from now on (its turn's DONE statement releases it
        # when nothing more is owed), or has let go of it: a renewal that then finds no lease is
        # no loss (`releasing`).
        self._releasing = False

    def __enter__(self) -> Heartbeat:
        _keeper().hold(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self._releasing = True
        _keeper().drop(self)

    def turn_started(self) -> None:
        self._deadline = time.monotonic() + settings.ADKWEB_TURN_HARD_TIME_LIMIT
        self._releasing = False

    def releasing(self) -> None:
        """Said by the drain before the statement that may release the lease (the turn's DONE): the
        keeper's renewal may run at the same time, wait for that statement's row lock and then find
        the lease gone. That is the drain's own release, not another worker's takeover: not warned
        about, and the lease not marked lost. Until the next `turn_started`."""
        self._releasing = True

    def beat(self) -> bool:
        """Renew once (on the keeper's thread); False: renew no more (lease lost or past the limit)."""
        if time.monotonic() > self._deadline:
            logger.error("Session %s: turn past its hard time limit; lease left to expire.", self.lease.session_pk)
            return False
        try:
            if not lease_renew(self.lease):
                if self._releasing:  # read after the renewal: set before any release it could have seen
                    return False
                self.lease.lost = True
                logger.warning("Session %s: run lease lost to another worker.", self.lease.session_pk)
                return False
        except Exception:  # a database blip: try again at the next beat, well inside the lease
            logger.warning("Session %s: lease renewal failed", self.lease.session_pk, exc_info=True)
        return True


class _Keeper:
    """One daemon thread per process that renews every lease its drains hold (a drain used to start
    and join a thread of its own: ~0.1 ms of CPU and a thread wake-up or two on every turn's way,
    1.6 ms of wall clock at load; bench/README.md, phase 12 (worker)). It wakes every
    ADKWEB_LEASE_RENEW_SECONDS and renews each lease held then, so a lease is renewed at most that
    long after it was taken or last renewed, as a drain's own thread did; a drain that starts or ends
    wakes nobody (unless the setting was shortened meanwhile: tests). Renewals run one after another:
    a hung database stalls them all, as it stalled each drain's thread. Made again in a forked child
    (a thread does not survive a fork)."""

    def __init__(self) -> None:
        self._held: dict[int, Heartbeat] = {}
        self._cond = threading.Condition()
        self._until = 0.0  # when the thread wakes next (monotonic)
        self._thread: threading.Thread | None = None

    def hold(self, heartbeat: Heartbeat) -> None:
        with self._cond:
            self._held[id(heartbeat)] = heartbeat
            if self._thread is None or not self._thread.is_alive():
                self._until = time.monotonic() + settings.ADKWEB_LEASE_RENEW_SECONDS
                self._thread = threading.Thread(target=self._run, name="lease-keeper", daemon=True)
                self._thread.start()
            elif (due := time.monotonic() + settings.ADKWEB_LEASE_RENEW_SECONDS) < self._until:
                self._until = due
                self._cond.notify()

    def drop(self, heartbeat: Heartbeat) -> None:
        with self._cond:
            self._held.pop(id(heartbeat), None)

    def held(self) -> int:
        with self._cond:
            return len(self._held)

    def _run(self) -> None:
        while True:
            with self._cond:
                while (left := self._until - time.monotonic()) > 0:
                    self._cond.wait(left)
                self._until = time.monotonic() + settings.ADKWEB_LEASE_RENEW_SECONDS
                due = list(self._held.values())
            if not due:
                continue
            try:
                for heartbeat in due:
                    if self._held.get(id(heartbeat)) is heartbeat and not heartbeat.beat():
                        self.drop(heartbeat)
            finally:
                try:
                    connection.close()  # back to the pool until the next beat (seconds away)
                except Exception:
                    logger.warning("The lease keeper could not close its connection.", exc_info=True)


_keeper = PerProcess(_Keeper).get


def keeper_threads() -> list[threading.Thread]:
    """This process's live lease keeper threads (tests: one, whatever the number of drains)."""
    return [t for t in threading.enumerate() if t.name == "lease-keeper" and t.is_alive()]
