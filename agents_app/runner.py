"""The one module that drives ADK: drain a session's inbox of turns under a per-session lease.

A worker takes the session's lease (an atomic UPDATE, so it holds across processes and on both
SQLite and PostgreSQL), runs the oldest queued turn with `Runner.run_async` on
`DjangoSessionService`, then the next, until the inbox is empty.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
import uuid
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from adkweb.notify import TURN_FAILED, notify

from . import events
from .models import AdkSession, Turn

logger = logging.getLogger(__name__)


def lease_acquire(session_pk: int, owner: str) -> bool:
    now = timezone.now()
    until = now + timedelta(seconds=settings.ADKWEB_SESSION_LEASE_SECONDS)
    free = Q(lease_owner="") | Q(lease_expires_at__lt=now) | Q(lease_owner=owner)
    return AdkSession.objects.filter(free, pk=session_pk).update(lease_owner=owner, lease_expires_at=until) == 1


def lease_release(session_pk: int, owner: str) -> None:
    AdkSession.objects.filter(pk=session_pk, lease_owner=owner).update(lease_owner="", lease_expires_at=None)


@transaction.atomic
def turn_claim_next(session_pk: int) -> Turn | None:
    """The oldest queued turn, marked running; orphans of a dead worker are retried or failed first."""
    max_attempts = settings.ADKWEB_MAX_TURN_ATTEMPTS
    for orphan in Turn.objects.select_for_update().filter(session_id=session_pk, status=Turn.Status.RUNNING):
        if orphan.attempts >= max_attempts:
            _turn_finish(orphan, Turn.Status.FAILED, "The worker running this turn stopped; gave up after retries.")
        else:
            orphan.status = Turn.Status.QUEUED
            orphan.save(update_fields=["status"])
    turn = (
        Turn.objects.select_for_update().filter(session_id=session_pk, status=Turn.Status.QUEUED).order_by("id").first()
    )
    if turn is None:
        return None
    turn.status = Turn.Status.RUNNING
    turn.attempts += 1
    turn.started_at = timezone.now()
    turn.save(update_fields=["status", "attempts", "started_at"])
    transaction.on_commit(lambda: events.notify_session_status(session_pk=session_pk), robust=True)
    return turn


def _turn_finish(turn: Turn, status: str, error: str = "") -> None:
    turn.status = status
    turn.error = error
    turn.finished_at = timezone.now()
    turn.save(update_fields=["status", "error", "finished_at"])
    session_pk, turn_id = turn.session_id, turn.pk
    if status == Turn.Status.FAILED:
        notify(TURN_FAILED, turn=turn, data={"error": error})  # webhooks; sent by Celery after commit

    def announce() -> None:
        events.notify_turn_finished(session_pk=session_pk, turn_id=turn_id, status=status)
        events.notify_session_status(session_pk=session_pk)

    transaction.on_commit(announce, robust=True)


@transaction.atomic
def turn_finish(turn_id: int, status: str, error: str = "") -> None:
    _turn_finish(Turn.objects.select_for_update().get(pk=turn_id), status, error)


@transaction.atomic
def turn_requeue(turn_id: int) -> None:
    Turn.objects.filter(pk=turn_id).update(status=Turn.Status.QUEUED)


def app_for_run(app_name: str) -> Any:
    """The app's ADK `App` (agents.build_app) with adkweb's plugins after the app's own."""
    from .agents import build_app
    from .plugins import BackendFieldsPlugin

    app = build_app(app_name)
    return app.model_copy(update={"plugins": [*app.plugins, BackendFieldsPlugin()]})


def run_services() -> dict[str, Any]:
    """The artifact and memory services every run gets (see agents_app.adk_services)."""
    from .adk_services import artifact_service, memory_service

    return {"artifact_service": artifact_service(), "memory_service": memory_service()}


async def turn_run(turn: Turn) -> None:
    """One `Runner.run_async` for one turn; stored events are published by the session service's
    hooks after commit, streaming chunks are published here and never stored."""
    from google.adk.agents.run_config import RunConfig, StreamingMode
    from google.adk.runners import Runner
    from google.genai import types

    from .api.render import partial_event_json
    from .session_service import DjangoSessionService, current_turn_id

    session = await AdkSession.objects.aget(pk=turn.session_id)
    app = await sync_to_async(app_for_run)(session.app_name)
    runner = Runner(app=app, app_name=session.app_name, session_service=DjangoSessionService(), **run_services())
    mode = StreamingMode.SSE if turn.streaming else StreamingMode.NONE
    token = current_turn_id.set(turn.pk)
    try:
        async for event in runner.run_async(
            user_id=session.user_id,
            session_id=session.session_id,
            new_message=types.Content.model_validate(turn.content) if turn.content else None,
            state_delta=turn.state_delta or None,
            run_config=RunConfig(streaming_mode=mode),
        ):
            if event.partial:
                await events.anotify_partial(session_pk=session.pk, event=partial_event_json(event), turn_id=turn.pk)
    finally:
        current_turn_id.reset(token)


def session_turns_run(session_pk: int) -> int:
    """Run every queued turn of one session, oldest first; returns how many ran."""
    from google.adk.errors._stale_session_error import StaleSessionError

    owner = uuid.uuid4().hex
    ran = 0
    while lease_acquire(session_pk, owner):
        try:
            while (turn := turn_claim_next(session_pk)) is not None:
                ran += 1
                try:
                    asyncio.run(turn_run(turn))
                except StaleSessionError:
                    if turn.attempts < settings.ADKWEB_MAX_TURN_ATTEMPTS:
                        logger.info("Turn %s hit a stale session; retrying after reload.", turn.pk)
                        turn_requeue(turn.pk)
                        continue
                    turn_finish(
                        turn.pk, Turn.Status.FAILED, "The session kept changing under this turn (stale session)."
                    )
                except Exception as exc:  # a tool or model error must not wedge the session
                    logger.warning("Turn %s failed", turn.pk, exc_info=True)
                    turn_finish(turn.pk, Turn.Status.FAILED, _describe(exc))
                else:
                    turn_finish(turn.pk, Turn.Status.DONE)
        finally:
            lease_release(session_pk, owner)
        # A turn queued between our last look and the release would otherwise wait for the sweeper.
        if not Turn.objects.filter(session_id=session_pk, status=Turn.Status.QUEUED).exists():
            break
    return ran


def _describe(exc: BaseException) -> str:
    last = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return last[:2000]
