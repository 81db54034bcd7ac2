"""The per-session run lease: one agent run at a time per session, across every worker process.

A drain takes the lease with an atomic UPDATE (it holds across processes, on SQLite and
PostgreSQL), a heartbeat thread renews it every ADKWEB_LEASE_RENEW_SECONDS while a turn runs,
and every stored event checks it on the locked session row (see DjangoSessionService). A worker
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
current_lease: contextvars.ContextVar[Lease | None] = contextvars.ContextVar("current_lease", default=None)


def lease_acquire(session_pk: int, owner: str) -> bool:
    now = timezone.now()
    free = Q(lease_owner="") | Q(lease_expires_at__lt=now) | Q(lease_owner=owner)
    until = now + timedelta(seconds=settings.ADKWEB_SESSION_LEASE_SECONDS)
    return AdkSession.objects.filter(free, pk=session_pk).update(lease_owner=owner, lease_expires_at=until) == 1


def lease_renew(lease: Lease) -> bool:
    """Extend a lease we still own; False if another worker owns it now."""
    rows = AdkSession.objects.filter(pk=lease.session_pk, lease_owner=lease.owner)
    return rows.update(lease_expires_at=lease.expiry()) == 1


def lease_release(session_pk: int, owner: str) -> None:
    AdkSession.objects.filter(pk=session_pk, lease_owner=owner).update(lease_owner="", lease_expires_at=None)


class Heartbeat:
    """Renews a lease from a thread of its own (a tool that blocks the event loop does not stop it)
    until stopped, until renewal finds another owner, or until the turn passes its hard time limit:
    then renewal stops, so a stuck run's session goes to another worker when the lease runs out."""

    def __init__(self, lease: Lease) -> None:
        self.lease = lease
        self._stop = threading.Event()
        self._deadline = time.monotonic() + settings.ADKWEB_TURN_HARD_TIME_LIMIT
        self._thread = threading.Thread(target=self._beat, name=f"lease-{lease.session_pk}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def turn_started(self) -> None:
        self._deadline = time.monotonic() + settings.ADKWEB_TURN_HARD_TIME_LIMIT

    def _beat(self) -> None:
        try:
            while not self._stop.wait(settings.ADKWEB_LEASE_RENEW_SECONDS):
                if time.monotonic() > self._deadline:
                    logger.error(
                        "Session %s: turn past its hard time limit; lease left to expire.", self.lease.session_pk
                    )
                    return
                try:
                    if not lease_renew(self.lease):
                        self.lease.lost = True
                        logger.warning("Session %s: run lease lost to another worker.", self.lease.session_pk)
                        return
                except Exception:  # a database blip: try again at the next beat, well inside the lease
                    logger.warning("Session %s: lease renewal failed", self.lease.session_pk, exc_info=True)
                connection.close()  # back to the pool until the next beat (seconds away)
        finally:
            connection.close()
