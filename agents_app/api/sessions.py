"""ADK REST: list-apps and sessions (`/api/adk/...`), same paths, bodies and JSON as `adk api_server`."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse
from google.adk.errors.already_exists_error import AlreadyExistsError
from pydantic import StrictStr

from adkweb.api import CamelModel, api_view, json_body, parse
from adkweb.errors import Conflict, Forbidden, Invalid, NotFound
from adkweb.roles import is_observer

from .. import agents, selectors, services
from ..models import Turn
from ..session_service import DjangoSessionService
from .render import session_json


class CreateSessionRequest(CamelModel):
    session_id: StrictStr | None = None
    state: dict[str, Any] | None = None
    events: list[Any] | None = None


def check_user(request: HttpRequest, user_id: str, *, write: bool) -> None:
    """The ADK user must be the caller, unless staff (any session) or a staff observer (reads)."""
    user = request.user
    me = user.get_username()
    if user_id == me or user.is_staff or (not write and is_observer(user)):
        return
    raise Forbidden(f"You may only use your own sessions: the user in the path must be {me!r}, not {user_id!r}.")


def check_app(app_name: str) -> None:
    if app_name not in agents.app_names():
        raise NotFound(f"App not found: {app_name}")


def session_or_404(app_name: str, user_id: str, session_id: str) -> Any:
    session = DjangoSessionService().get_session_sync(app_name=app_name, user_id=user_id, session_id=session_id)
    if session is None:
        raise NotFound(f"Session not found: {session_id}")
    return session


@api_view("GET")
def list_apps(request: HttpRequest) -> JsonResponse:
    names = agents.app_names()
    if request.GET.get("detailed", "").lower() not in {"1", "true", "yes"}:
        return JsonResponse(names, safe=False)
    apps = []
    for name in names:
        info = agents.app_info(name)
        apps.append({"name": name, "rootAgentName": name, "description": info.description, "language": "python"})
    return JsonResponse({"apps": apps})


@api_view("GET", "POST")
def sessions(request: HttpRequest, app_name: str, user_id: str) -> JsonResponse:
    check_user(request, user_id, write=request.method == "POST")
    check_app(app_name)
    if request.method == "GET":
        listed = DjangoSessionService().list_sessions_sync(app_name=app_name, user_id=user_id).sessions
        return JsonResponse([session_json(s) for s in listed], safe=False)
    data = json_body(request, allow_empty=True)  # no body (or null) is {}; [] or 0 is not
    body = parse(CreateSessionRequest, {} if data is None else data)
    return _create(app_name, user_id, body.session_id, body.state, body.events)


@api_view("GET", "DELETE", "POST")
def session(request: HttpRequest, app_name: str, user_id: str, session_id: str) -> JsonResponse:
    check_user(request, user_id, write=request.method != "GET")
    if request.method == "GET":
        return JsonResponse(session_json(session_or_404(app_name, user_id, session_id)))
    if request.method == "POST":  # ADK's deprecated create-with-id: the body is the initial state
        check_app(app_name)
        state = json_body(request, allow_empty=True)
        if state is not None and not isinstance(state, dict):
            raise Invalid("The body must be the session's initial state: a JSON object.")
        return _create(app_name, user_id, session_id, state, None)
    row = selectors.adk_session_get(app_name=app_name, user_id=user_id, session_id=session_id)
    if row is None:
        raise NotFound(f"Session not found: {session_id}")
    if Turn.objects.filter(session=row, status__in=selectors.ACTIVE_TURN_STATUSES).exists():
        raise Conflict("The agent is working in this session; delete it once its turn has finished.")
    DjangoSessionService().delete_session_sync(app_name=app_name, user_id=user_id, session_id=session_id)
    return JsonResponse(None, safe=False)


def _create(app_name: str, user_id: str, session_id: str | None, state: dict | None, events: Any) -> JsonResponse:
    if events:
        raise Invalid("Creating a session with initial events is not supported by adkweb.")
    try:
        row = services.session_create(app_name=app_name, user_id=user_id, session_id=session_id, state=state)
    except agents.AgentNotFound as exc:  # ADK's words for it
        raise NotFound(f"App not found: {app_name}") from exc
    except AlreadyExistsError as exc:
        raise Conflict(f"Session already exists: {session_id}") from exc
    return JsonResponse(session_json(session_or_404(app_name, user_id, row.session_id)))
