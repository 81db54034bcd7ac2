"""ADK REST: sessions (`/api/adk/apps/...`), same paths, bodies and JSON as `adk api_server`."""

from __future__ import annotations

import uuid
from typing import Any

from asgiref.sync import async_to_sync
from django.http import HttpRequest, JsonResponse
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.sessions.state import State

from adkweb.api import api_view
from adkweb.errors import Conflict, Forbidden, Invalid, NotFound
from adkweb.roles import is_observer

from .. import agents, selectors
from ..app_state import refused_keys
from ..models import AgentConfig, RemoteApp, Turn
from ..session_ids import ids_check
from ..session_service import DjangoSessionService
from .render import session_json
from .schemas import (
    CreateSessionRequest,
    UpdateMemoryRequest,
    UpdateSessionRequest,
    body_json,
    not_an_object,
    parse_body,
    parse_optional_body,
)

EVAL_PREFIXES = ("adk-eval-session-", "___eval___session___")  # ADK hides its eval sessions from lists


def check_user(request: HttpRequest, user_id: str, *, write: bool) -> None:
    """The ADK user must be the caller, unless staff (any session) or a staff observer (reads)."""
    user = request.user
    me = user.get_username()
    if user_id == me or user.is_staff or (not write and is_observer(user)):
        return
    raise Forbidden(f"You may only use your own sessions: the user in the path must be {me!r}, not {user_id!r}.")


def check_state(request: HttpRequest, app_name: str, state: dict[str, Any] | None) -> None:
    """403 when the state has `app:` keys the caller may not set (agents_app.app_state)."""
    named = refused_keys(request.user, state)
    if not named:
        return
    raise Forbidden(
        f"Only agent admins (people who may configure agents) and superusers may set app-wide state: "
        f"'{State.APP_PREFIX}' keys are read by every user's sessions of {app_name!r}. Refused: {named}. "
        "Nothing was changed: send the other keys without these ('user:' and plain keys are yours)."
    )


def check_app(app_name: str) -> None:
    """404 unless the app is one of `agents.app_names()`: asked of that one name (a code-defined
    app, from the settings, costs no query; the others one indexed lookup each), not of the list."""
    if app_name in agents.code_agents():
        return
    if AgentConfig.objects.filter(name=app_name, enabled=True).exists():
        return
    if RemoteApp.objects.filter(name=app_name, enabled=True).exists():
        return
    raise NotFound(f"App not found: {app_name}")


def session_or_404(app_name: str, user_id: str, session_id: str) -> Any:
    session = DjangoSessionService().get_session_sync(app_name=app_name, user_id=user_id, session_id=session_id)
    if session is None:
        raise NotFound(f"Session not found: {session_id}")
    return session


@api_view("GET", "POST")
def sessions(request: HttpRequest, app_name: str, user_id: str) -> JsonResponse:
    check_user(request, user_id, write=request.method == "POST")
    check_app(app_name)
    if request.method == "GET":
        listed = DjangoSessionService().list_sessions_sync(app_name=app_name, user_id=user_id).sessions
        return JsonResponse([session_json(s) for s in listed if not s.id.startswith(EVAL_PREFIXES)], safe=False)
    body = parse_optional_body(CreateSessionRequest, request) or CreateSessionRequest()  # no body: defaults
    _no_options(body.options)
    check_state(request, app_name, body.state)
    return _create(app_name, user_id, body.session_id, body.state, body.events)


@api_view("GET", "DELETE", "POST", "PATCH")
def session(request: HttpRequest, app_name: str, user_id: str, session_id: str) -> JsonResponse:
    check_user(request, user_id, write=request.method != "GET")
    if request.method == "GET":
        return JsonResponse(session_json(session_or_404(app_name, user_id, session_id)))
    if request.method == "PATCH":
        body = parse_body(UpdateSessionRequest, request)
        check_state(request, app_name, body.state_delta)
        return JsonResponse(session_json(_update(app_name, user_id, session_id, body.state_delta)))
    if request.method == "POST":  # ADK's deprecated create-with-id: the body is the initial state
        check_app(app_name)
        state = body_json(request, allow_empty=True)  # the body is the initial state
        if state is not None and not isinstance(state, dict):
            raise not_an_object(state, model=False)  # ADK's body here is a dict, not a model
        check_state(request, app_name, state)
        return _create(app_name, user_id, session_id, state, None)
    if not _idle_session(app_name, user_id, session_id, "delete it", missing_ok=True):
        return JsonResponse(None, safe=False)  # as ADK: nothing to delete is done (a retried DELETE)
    DjangoSessionService().delete_session_sync(
        app_name=app_name, user_id=user_id, session_id=session_id, actor=request.user
    )
    return JsonResponse(None, safe=False)


@api_view("PATCH")
def memory(request: HttpRequest, app_name: str, user_id: str) -> JsonResponse:
    """ADK's memory PATCH: the session's events go into the memory service (ADKWEB_MEMORY_SERVICE)."""
    from ..adk_services import memory_service

    check_user(request, user_id, write=True)
    body = parse_body(UpdateMemoryRequest, request)
    not_for_remote_apps(app_name, "memory")
    session = session_or_404(app_name, user_id, body.session_id)
    async_to_sync(memory_service().add_session_to_memory)(session)
    return JsonResponse(None, safe=False)


def _no_options(options: dict[str, Any] | None) -> None:
    """ADK's server passes a create's `options` to its session service as keyword arguments, refusing them
    (400) for one that takes none, as adkweb's does not: the same answers."""
    if not options:
        return
    bound = sorted(options.keys() & {"app_name", "user_id", "state", "session_id"})
    if bound:
        raise Invalid(f"Session options cannot contain keys already bound by the endpoint: {', '.join(bound)}")
    raise Invalid("Session options are not supported by the configured session service.")


def _idle_session(app_name: str, user_id: str, session_id: str, what: str, *, missing_ok: bool = False) -> bool:
    """409 while a turn of the session is queued or running; 404 (or False, `missing_ok`) when it is not there."""
    row = selectors.adk_session_get(app_name=app_name, user_id=user_id, session_id=session_id)
    if row is None and missing_ok:
        return False
    if row is None:
        raise NotFound(f"Session not found: {session_id}")
    if Turn.objects.filter(session=row, status__in=selectors.ACTIVE_TURN_STATUSES).exists():
        raise Conflict(f"The agent is working in this session; {what} once its turn has finished.")
    return True


def not_for_remote_apps(app_name: str, what: str) -> None:
    if agents.remote_app(app_name) is not None:
        raise Invalid(
            f"{app_name!r} runs on a remote ADK server, which keeps its {what}: adkweb does not change it "
            "there (send stateDelta with /run or /run_sse to change the session's state)."
        )


def _update(app_name: str, user_id: str, session_id: str, state_delta: dict[str, Any]) -> Any:
    """ADK's PATCH: a user event carrying the state delta (temp: keys are not kept), no agent run."""
    from google.adk.events.event import Event
    from google.adk.events.event_actions import EventActions

    not_for_remote_apps(app_name, "session state")
    _idle_session(app_name, user_id, session_id, "change its state")
    session = session_or_404(app_name, user_id, session_id)
    event = Event(invocation_id=f"p-{uuid.uuid4()}", author="user", actions=EventActions(state_delta=state_delta))
    async_to_sync(DjangoSessionService().append_event)(session=session, event=event)
    return session


def _create(app_name: str, user_id: str, session_id: str | None, state: dict | None, events: Any) -> JsonResponse:
    """ADK's create (the caller checked the app): the session as the store created it, as ADK's
    server answers with what its service's create returns (not read back)."""
    if events:
        raise Invalid("Creating a session with initial events is not supported by adkweb.")
    ids_check(user_id=user_id, session_id=session_id)
    try:
        session = DjangoSessionService().create_session_sync(
            app_name=app_name, user_id=user_id, state=state, session_id=session_id
        )
    except AlreadyExistsError as exc:
        raise Conflict(f"Session already exists: {session_id}") from exc
    return JsonResponse(session_json(session))
