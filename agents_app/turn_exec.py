"""One turn of a session's drain (agents_app.runner): claim it, run or resume it with
`Runner.run_async` on `DjangoSessionService`, or close it from what is stored; and its end.

Exactly once, as a durable-execution engine promises it:

- A turn's ADK invocation id is recorded with its first stored event. A turn found running with
  no live worker (the worker died) is *resumed* (`run_async(invocation_id=..., new_message=None)`
  on a resumable `App`): its message is not stored again, stored tool responses and model
  replies are not produced again. A turn that stored nothing is simply run.
- An invocation whose final reply (or the error of a tool that raised) is already stored is
  not resumed (ADK would call the model again): the turn is closed from what is stored.
- Tools may still run twice if a worker dies between a tool's side effect and the storing of
  its response: tools pass `agents_app.tools.idempotency_key(tool_context)` downstream.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Coroutine
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, NamedTuple

from asgiref.sync import sync_to_async
from django.conf import settings

from adkweb.log_context import log_ids

from . import events, turn_sql
from .config_history import current_version_id
from .leases import Lease, LeaseLost, current_lease
from .models import AdkSession, Turn
from .run_cache import app_for_run, runner_cached, runner_for
from .turn_close import (  # noqa: F401 - re-exported (agents_app.runner, tests)
    Plan,
    turn_claim_next,
    turn_finish,
    turn_plan,
    turn_requeue,
)

logger = logging.getLogger("agents_app.runner")  # the drain's log name, as before the split


class TurnTimedOut(Exception):
    """The turn passed ADKWEB_TURN_SOFT_TIME_LIMIT and was stopped."""


def app_and_config_version(app_name: str) -> tuple[Any, int | None]:
    """The app to run and the configuration version it was built from (None for code agents),
    built anew (the worker's runs use agents_app.run_cache, which builds once per configuration)."""
    before = current_version_id(app_name)
    app = app_for_run(app_name)
    after = current_version_id(app_name)
    if after != before:  # the agent was saved while it was being built: build the newer one
        app, after = app_for_run(app_name), current_version_id(app_name)
    return app, after


class SessionIds(NamedTuple):
    """A claimed session's ids as its claim read them: all a local run uses of the row (no model made)."""

    pk: int
    app_name: str
    user_id: str
    session_id: str


@dataclass(frozen=True)
class _Prepared:
    session: AdkSession | SessionIds  # the row where it was read whole (the thread path, a remote run)
    runner: Any = None  # this loop's cached Runner (run_cache)
    remote: Any = None  # a RemoteApp: agents_app.remote runs the turn there


def _prepare(turn: Turn, claim: turn_sql.Claim | None = None) -> _Prepared:
    """A turn's start in one database hop: its session, the runner (built only when the agent's
    configuration changed) and the configuration version it runs, kept on `turn` until the write
    that ends it (turn_finish, turn_sql.done_next) records it. `claim`: what the statement that
    claimed the turn read (its session's ids, the configuration's stamp), not read again."""
    from .agents import remote_app

    session: AdkSession | SessionIds
    if claim is None:
        session = AdkSession.objects.get(pk=turn.session_id)
        found = runner_for(session.app_name)
    else:
        session = _claimed_session(turn, claim)
        found = runner_for(claim.app_name, claim.stamp_row)
    if found is None:  # no local app of that name: a remote one, or an error saying there is none
        remote = remote_app(session.app_name)
        if remote is None:
            app_for_run(session.app_name)  # raises why
        return _Prepared(AdkSession.objects.get(pk=turn.session_id), remote=remote)  # the remote run reads it whole
    runner, config_version = found
    turn.config_version_id = config_version  # recorded when the turn ends, in the same write
    return _Prepared(session, runner=runner)


def _claimed_session(turn: Turn, claim: turn_sql.Claim) -> SessionIds:
    """The session's ids as the claim read them (all a local run uses of the row)."""
    return SessionIds(turn.session_id, claim.app_name, claim.user_id, claim.session_id)


async def _prepared(turn: Turn, claim: turn_sql.Claim | None) -> _Prepared:
    """`_prepare`, without the hop to the database thread when the claim's stamp says this loop's
    cached runner is current (the common case: a turn then starts with no read of its own)."""
    if claim is not None and (found := runner_cached(claim.app_name, claim.stamp_row)) is not None:
        runner, turn.config_version_id = found
        return _Prepared(_claimed_session(turn, claim), runner=runner)
    return await sync_to_async(_prepare)(turn, claim)


async def turn_run(
    turn: Turn, *, resume: bool, lease: Lease | None = None, claim: turn_sql.Claim | None = None
) -> None:
    """One `Runner.run_async` for one turn (or its resumption); stored events are published by the
    session service after commit, streaming chunks are published here and never stored. `claim`:
    what was read with the turn's claim (agents_app.turn_sql)."""
    from google.adk.agents.run_config import RunConfig, StreamingMode
    from google.genai import types

    from .api.render import partial_event_json
    from .session_service import current_turn_id, current_turn_invocations, read_ahead

    prepared = await _prepared(turn, claim)
    session = prepared.session
    if prepared.remote is not None:
        from .remote.run import remote_turn_run

        assert isinstance(session, AdkSession)  # a remote run's session is read whole (`_prepare`)

        await _within_time_limit(remote_turn_run(turn, session=session, app=prepared.remote, lease=lease))
        return
    mode = StreamingMode.SSE if turn.streaming else StreamingMode.NONE
    if resume:
        what: dict[str, Any] = {"invocation_id": turn.invocation_id, "new_message": None}
    else:
        # No content: the agent runs again on the session's history (ADK's run without a new message).
        message = types.Content.model_validate(turn.content) if turn.content else None
        what = {"new_message": message, "state_delta": turn.state_delta or None}
    recorded = {turn.invocation_id} if turn.invocation_id else set()
    tokens = current_turn_id.set(turn.pk), current_lease.set(lease), current_turn_invocations.set(recorded)
    read = claim.session if claim is not None else None  # the Runner's get_session answered from it
    ahead = read_ahead.set([(session.app_name, session.user_id, session.session_id, read)] if read else None)
    # The turn's events published while it goes on, in order: on the drain's publisher (its end is
    # queued behind them, agents_app.runner), else on one of the turn's own, sent before it returns.
    publisher = events.turn_publisher.get()
    own = publisher is None
    if publisher is None:
        publisher = events.TurnPublisher()
    published = events.turn_publisher.set(publisher)
    run = prepared.runner.run_async(
        user_id=session.user_id, session_id=session.session_id, run_config=RunConfig(streaming_mode=mode), **what
    )

    async def consume() -> None:
        async with aclosing(run):  # closed here, within the turn, whatever ends it
            async for event in run:
                if event.partial:
                    chunk = {"session_pk": session.pk, "event": partial_event_json(event), "turn_id": turn.pk}
                    publisher.put(events.anotify_partial, chunk)

    try:
        await _within_time_limit(consume())
    finally:
        if own:
            await publisher.flush()  # every end of the turn is published after its events
        events.turn_publisher.reset(published)
        current_turn_id.reset(tokens[0])
        current_lease.reset(tokens[1])
        current_turn_invocations.reset(tokens[2])
        read_ahead.reset(ahead)


async def _within_time_limit(run: Coroutine[Any, Any, None]) -> None:
    limit = asyncio.timeout(settings.ADKWEB_TURN_SOFT_TIME_LIMIT)
    try:
        async with limit:
            await run
    except TimeoutError as exc:
        if limit.expired():
            raise TurnTimedOut(
                f"The turn ran longer than its time limit ({settings.ADKWEB_TURN_SOFT_TIME_LIMIT} s)."
            ) from exc
        raise


# What `turn_execute` tells the drain: go on with the next turn, stop, or (with `finish_done=False`)
# the turn ran to its end and is owed its DONE by the caller (agents_app.turn_sql.done_next).
NEXT, STOP, RAN = "next", "stop", "ran"


async def turn_execute(
    turn: Turn, lease: Lease, *, finish_done: bool = True, claim: turn_sql.Claim | None = None
) -> str:
    """Run, resume or close one claimed turn: NEXT, or STOP when the drain must stop (lease lost, or
    an outage of the database or broker: the sweeper brings the turn back later, to be resumed), or
    RAN when it ran to its end and `finish_done` is False (the caller marks it done)."""
    with log_ids(turn=turn.pk, session=turn.session_id):  # on every line logged meanwhile
        return await _turn_execute(turn, lease, finish_done, claim)


async def _turn_execute(turn: Turn, lease: Lease, finish_done: bool, claim: turn_sql.Claim | None) -> str:
    from google.adk.errors._stale_session_error import StaleSessionError

    db = sync_to_async
    ran = False  # to its end, its DONE the caller's: published on the turn's publisher, behind its events
    try:
        try:
            plan = await db(turn_plan)(turn) if turn.invocation_id else Plan("run")  # no hop when nothing is stored
            if plan.action in ("done", "failed"):
                logger.info("Turn %s: its invocation already ended (%s); closing it.", turn.pk, plan.action)
                await events.status_sent()
                await events.publishes_sent()
                await db(turn_finish)(turn.pk, plan.action, plan.error, lease)
                return NEXT
            await turn_run(turn, resume=plan.action == "resume", lease=lease, claim=claim)
            ran = not finish_done
        finally:  # the claim's "running" (runner._drain_pg) leaves before any end below is published
            await events.status_sent()
            if not ran:  # an end published from the database thread below: after the turn's events
                await events.publishes_sent()
    except LeaseLost:
        logger.warning("Turn %s: lease lost; leaving the turn to the worker that owns it now.", turn.pk)
        return STOP
    except StaleSessionError:
        if turn.attempts < settings.ADKWEB_MAX_TURN_ATTEMPTS:
            logger.info("Turn %s hit a stale session; resuming it after reload.", turn.pk)
            await db(turn_requeue)(turn.pk, lease)
            return NEXT
        msg = "The session kept changing under this turn (stale session)."
        await db(turn_finish)(turn.pk, Turn.Status.FAILED, msg, lease, turn.config_version_id)
    except TurnTimedOut as exc:
        await db(turn_finish)(turn.pk, Turn.Status.FAILED, str(exc), lease, turn.config_version_id)
    except Exception as exc:
        if _is_outage(exc):
            logger.warning("Turn %s cut short by an outage; it will be resumed.", turn.pk, exc_info=True)
            await db(_requeue_quietly)(turn.pk, lease)
            return STOP
        logger.warning("Turn %s failed", turn.pk, exc_info=True)  # a tool or model error must not wedge the session
        await db(turn_finish)(turn.pk, Turn.Status.FAILED, _describe(exc), lease, turn.config_version_id)
    else:
        if not finish_done:
            return RAN
        await db(turn_finish)(turn.pk, Turn.Status.DONE, "", lease, turn.config_version_id)
    return NEXT


def _is_outage(exc: BaseException) -> bool:
    """Infrastructure failures (database, broker, channel layer): worth resuming, not the turn's fault."""
    from django.db import InterfaceError, OperationalError

    names = {f"{type(e).__module__}.{type(e).__name__}" for e in _chain(exc)}
    kinds = (OperationalError, InterfaceError)
    return any(isinstance(e, kinds) for e in _chain(exc)) or any(
        n.startswith(("redis.exceptions.", "kombu.exceptions.OperationalError")) for n in names
    )


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    while exc is not None and exc not in out:
        out.append(exc)
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return out


def _requeue_quietly(turn_id: int, lease: Lease) -> None:
    try:
        turn_requeue(turn_id, lease)
    except Exception:  # the database itself is down: the turn stays running and its lease runs out
        logger.warning("Turn %s could not be requeued; the sweeper will find it.", turn_id, exc_info=True)


def _describe(exc: BaseException) -> str:
    last = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return last[:2000]
