"""ADK REST: `/run` and `/run_sse`, over durable turns.

The request queues a Turn (a text message, or function responses that answer open tickets under
the approvals rules) and a drain slot of this web process (agents_app.eager) or a worker runs it;
the request follows that Turn and returns (or streams) the events its run stored. If the client
goes away the turn still runs to the end.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from asgiref.sync import sync_to_async
from django.db import connection
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from google.genai import types

from adkweb import compiled
from adkweb.api import api_view, authenticate_request
from adkweb.errors import Invalid, NotFound
from approvals import services as approvals

from .. import eager, selectors, services, tokens
from ..content import content_parse
from ..idempotency import Outcome, idempotent
from ..models import AdkSession, Turn
from .schemas import RunAgentRequest, parse_body
from .sessions import check_app, check_state, check_user
from .watch import Step, TurnWatch, follow

R = TypeVar("R", bound=HttpResponseBase)


def _prepare(
    request: HttpRequest, joined: Callable[[AdkSession], object] = lambda row: None
) -> tuple[RunAgentRequest, AdkSession, types.Content | None]:
    """Authenticate (api_view leaves it to this first hop), then validate everything that can be
    validated before anything is queued (the session row is read once, here: its revision is where
    the follower starts, see watch.follow). `joined(row)` is called as soon as the row is read (the
    follower's join of the session's group starts then, while the rest is checked)."""
    try:  # read first, refused in the order as before (authentication first)
        body, unreadable = parse_body(RunAgentRequest, request), None
    except Exception as exc:  # noqa: BLE001 - raised below, after authentication
        body, unreadable = None, exc
    # A token's lookup carries the session's read in its round trip; its row is used only once the
    # caller is authenticated and allowed (the same refusals, in the same order, as reading it after).
    ride = None if body is None else compiled.Ride("run_session_get", (), _session_query, _session_key(body))
    setattr(request, tokens.RIDE, ride)
    authenticate_request(request)
    if body is None:
        raise cast(Exception, unreadable)
    check_user(request, body.user_id, write=True)
    check_state(request, body.app_name, body.state_delta)
    check_app(body.app_name)
    row = _session_row(ride.rows) if ride is not None and ride.rows is not None else _session_get(*_session_key(body))
    if row is None:
        raise NotFound(f"Session not found: {body.session_id}")
    joined(row)
    if body.new_message is None:  # as in ADK: run again on the history, or continue invocationId
        _check_resumed(body.invocation_id)
        return body, row, None
    content = content_parse(body.new_message.model_dump(mode="json", exclude_none=True))
    _check_invocation(row.pk, content, body.invocation_id)
    return body, row, content


def _session_fields() -> list[str]:
    return [f.attname for f in AdkSession._meta.concrete_fields]


def _session_query(app_name: str, user_id: str, session_id: str) -> QuerySet:
    found = AdkSession.objects.filter(app_name=app_name, user_id=user_id, session_id=session_id)
    return found.order_by("pk").values_list(*_session_fields())[:1]


def _session_key(body: RunAgentRequest) -> tuple[str, str, str]:
    return body.app_name, body.user_id, body.session_id


def _session_get(app_name: str, user_id: str, session_id: str) -> AdkSession | None:
    """selectors.adk_session_get in a statement compiled once per process (every /run asks it)."""
    return _session_row(compiled.rows("run_session_get", (), _session_query, app_name, user_id, session_id))


def _session_row(found: list[list[Any]]) -> AdkSession | None:
    return AdkSession.from_db(connection.alias, _session_fields(), found[0]) if found else None


def _check_resumed(invocation_id: str | None) -> None:
    """The invocation a run on the history continues is kept on its Turn, in a column of 128 characters
    (ADK's ids are "e-" and a UUID): a longer one was PostgreSQL's DataError, a 500."""
    limit = Turn._meta.get_field("invocation_id").max_length or 0
    if invocation_id is not None and len(invocation_id) > limit:
        raise Invalid(f"invocationId is at most {limit} characters, not {len(invocation_id)}.")


def _check_invocation(session_pk: int, content: types.Content, invocation_id: str | None) -> None:
    """ADK resumes the invocation of the answered call; a different invocationId is a mistake."""
    ids = [p.function_response.id for p in content.parts or [] if p.function_response and p.function_response.id]
    if not invocation_id or not ids:
        return
    tickets = selectors.tickets_by_call_id(session_pk, call_ids=ids)
    wrong = sorted(cid for cid, t in tickets.items() if t.invocation_id and t.invocation_id != invocation_id)
    if wrong:
        raise Invalid(f"invocationId {invocation_id} is not the invocation of function call(s) {', '.join(wrong)}.")


def _queue(
    request: HttpRequest, body: RunAgentRequest, session: AdkSession, content: types.Content | None, streaming: bool
) -> tuple[int | None, int | None]:
    """The Turn that carries the message: answers go through the approvals rules (None: they were
    approvals recorded toward a ticket's quorum, and the agent does not run yet); and the session
    revision a follower of that turn starts from (None for a replayed request's older turn)."""

    def submit() -> Outcome:
        if content is None:  # the agent runs again on the session's history
            turn = services.turn_create(
                session=session,
                content=None,
                actor=request.user,
                state_delta=body.state_delta,
                streaming=streaming,
                invocation_id=body.invocation_id or "",  # ADK's resume of that invocation
            )
        else:
            answered = approvals.message_submit(
                session=session, content=content, actor=request.user, state_delta=body.state_delta, streaming=streaming
            )
            if answered is None:  # approvals held toward a ticket's quorum: no run, no events
                return Outcome(200, body=[])
            turn = answered
        return Outcome(200, turn_id=turn.pk)

    # Retried with the same Idempotency-Key: follow the first request's turn instead of queueing another.
    # The request waits for its turn anyway: a drain slot of this process runs it (agents_app.eager)
    # when one is free, else a worker is woken after the commit as for any turn.
    with eager.reserved(session.pk):
        outcome = idempotent(request, submit)
    request.idempotent_replayed = outcome.replayed  # type: ignore[attr-defined]
    if outcome.turn_id is None:
        if outcome.body == []:
            return None, None
        raise NotFound("The turn this Idempotency-Key queued no longer exists (its session was deleted).")
    return outcome.turn_id, None if outcome.replayed else session.revision


@dataclass
class Started:
    watch: TurnWatch
    turn_id: int | None  # None: an approval held for others, no run
    revision: int | None  # where the follower starts (watch.follow)
    streaming: bool
    split_artifacts: bool = True  # /run_sse: ADK's two frames for an event with content and an artifactDelta


async def _start(request: HttpRequest, *, sse: bool) -> Started:
    """Validate, join the session's group, queue the turn: one thread hop. The join (a Redis round
    trip, on this loop) starts as soon as the session row is read and runs while the request's thread
    checks the message and writes the turn (for an answer: reads and locks its ticket); the thread
    waits for it once the turn's row is written, before its transaction can commit
    (services.before_turn_commit), so the follower is a member before any worker can claim the
    turn and nothing of it is missed. (What the session stores meanwhile from an earlier turn, after
    the revision the follower starts from, shows as a gap: read, as any gap is.)"""
    loop = asyncio.get_running_loop()
    watches: list[TurnWatch] = []
    joining: list[concurrent.futures.Future] = []

    def join(row: AdkSession) -> None:
        watches.append(TurnWatch(row.pk))
        joining.append(asyncio.run_coroutine_threadsafe(watches[0].start(), loop))

    def prepare_and_queue() -> Started:
        body, session, content = _prepare(request, join)
        streaming = sse and body.streaming  # like ADK, /run ignores "streaming"
        with services.before_turn_commit(joining[0].result):
            turn_id, revision = _queue(request, body, session, content, streaming)
        joining[0].result()  # no turn written (approvals held, a replay): a member all the same
        return Started(watches[0], turn_id, revision, streaming, not body.function_call_event_id)

    try:
        return await sync_to_async(prepare_and_queue)()
    except BaseException:
        if joining:  # joined, or joining: leave the group (the join's own failure is the one raised)
            with contextlib.suppress(BaseException):
                await asyncio.wrap_future(joining[0])
                await watches[0].stop()
        raise


@api_view("POST", auth_in_view=True)
async def run(request: HttpRequest) -> HttpResponse:
    started = await _start(request, sse=False)
    watch, turn_id = started.watch, started.turn_id
    events: list[dict] = []
    if turn_id is None:  # an approval held for others: no run, no events
        await watch.stop()
        return JsonResponse(events, safe=False)
    try:
        async for step in follow(watch, turn_id, partials=False, revision=started.revision):
            if step.kind == "event":
                events.append(step.data)
            elif step.kind == "error":
                return JsonResponse({"detail": f"The agent run failed: {step.data}"}, status=500)
            else:
                return JsonResponse({"detail": step.data}, status=504)
    finally:
        watch.stop_soon()  # the answer goes without waiting for the group's leave
    return _marked(request, JsonResponse(events, safe=False))


def _marked(request: HttpRequest, response: R) -> R:
    if getattr(request, "idempotent_replayed", False):
        response["Idempotent-Replayed"] = "true"
    return response


@api_view("POST", auth_in_view=True)
async def run_sse(request: HttpRequest) -> HttpResponseBase:
    started = await _start(request, sse=True)
    # The charset, as ADK's: a client that follows HTTP's old ISO-8859-1 default for text/* (requests) reads UTF-8
    response = StreamingHttpResponse(_sse(started), content_type="text/event-stream; charset=utf-8")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return _marked(request, response)


async def _sse(started: Started) -> AsyncIterator[str]:
    watch, turn_id = started.watch, started.turn_id
    if turn_id is None:  # an approval held for others: no run, an empty stream
        await watch.stop()
        return
    try:
        async for step in follow(watch, turn_id, partials=started.streaming, revision=started.revision):
            frames = sse_frames(step.data, started.split_artifacts) if step.kind == "event" else [error_frame(step)]
            for payload in frames:
                yield f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"
    finally:
        await watch.stop()


def sse_frames(event: dict[str, Any], split_artifacts: bool) -> list[dict[str, Any]]:
    """An event's /run_sse frames, as ADK's server streams them: an event with content parts and an
    artifactDelta goes as two frames of the same id, the event with an empty artifactDelta, then the
    delta without the content (ADK Web renders an artifact from either; each once so). Not when the
    request names a functionCallEventId (ADK's condition)."""
    actions = event.get("actions") or {}
    if not (split_artifacts and actions.get("artifactDelta") and (event.get("content") or {}).get("parts")):
        return [event]
    content_only = {**event, "actions": {**actions, "artifactDelta": {}}}
    delta_only = {key: value for key, value in event.items() if key != "content"}
    return [content_only, delta_only]


def error_frame(step: Step) -> dict[str, Any]:
    """ADK's in-band error: `{"error": "<Type>: <message>", "error_details": {...}}`."""
    text = str(step.data)
    kind, sep, message = text.partition(": ")
    if step.kind == "timeout":
        kind, message = "TimeoutError", text
    elif not sep or " " in kind:  # not "<ExceptionType>: <message>"
        kind, message = "AgentRunError", text
    kind = kind.rsplit(".", 1)[-1]
    details = {"error_type": kind, "error_message": message, "timestamp": time.time()}
    return {"error": f"{kind}: {message}", "error_details": details}
