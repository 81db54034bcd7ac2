"""ADK REST: the apps (`list-apps`, `app-info`) and the server (`health`, `version`), as `adk api_server`."""

from __future__ import annotations

import sys
from typing import Any

from asgiref.sync import async_to_sync
from django.http import HttpRequest, JsonResponse

from adkweb.api import api_view
from adkweb.errors import BadGateway, Invalid, NotFound

from .. import agents, code_apps
from .schemas import AppInfo, Health, ListAppsResponse, Version


def _root_agent(app_name: str) -> Any:
    try:
        return agents.build_agent(app_name)
    except agents.AgentNotFound as exc:
        raise NotFound(f"App not found: {app_name}") from exc


def _summary(app_name: str) -> AppInfo | None:
    """list-apps?detailed=true's entry for one app; None when it cannot be built (ADK skips those).
    A remote app is described from its configuration (its server is not asked while listing)."""
    remote = agents.remote_app(app_name)
    if remote is not None:
        return AppInfo(
            name=app_name, root_agent_name=remote.remote_app_name, description=remote.description, language="python"
        )
    try:
        root = agents.build_agent(app_name)
    except (agents.AgentConfigError, agents.AgentNotFound, code_apps.CodeAppError):
        return None
    computer_use = any(type(t).__name__ == "ComputerUseToolset" for t in getattr(root, "tools", []) or [])
    return AppInfo(
        name=app_name,
        root_agent_name=root.name,
        description=root.description or "",
        language=code_apps.language(app_name),  # type: ignore[arg-type]
        is_computer_use=computer_use,
    )


@api_view("GET")
def list_apps(request: HttpRequest) -> JsonResponse:
    """The enabled apps' names; `?detailed=true`: ADK's ListAppsResponse."""
    names = agents.app_names()
    if request.GET.get("detailed", "").lower() not in {"1", "true", "yes", "on"}:
        return JsonResponse(names, safe=False)
    apps = [info for info in map(_summary, names) if info is not None]
    return JsonResponse(ListAppsResponse(apps=apps).model_dump(mode="json", by_alias=True))


@api_view("GET")
def app_info(request: HttpRequest, app_name: str) -> JsonResponse:
    """ADK's AppInfo with every agent of the app (instruction, tool declarations, sub-agents)."""
    from google.adk.agents import LlmAgent
    from google.adk.utils.agent_info import get_agents_dict

    remote = agents.remote_app(app_name)
    if remote is not None:
        return JsonResponse({**_remote_app_info(remote), "name": app_name})
    root = _root_agent(app_name)
    if not isinstance(root, LlmAgent):
        raise Invalid("Root agent is not an LlmAgent")
    info = AppInfo(
        name=app_name,
        root_agent_name=root.name,
        description=root.description or "",
        language="python",  # ADK's app-info says python whatever the app is written in
        agents=async_to_sync(get_agents_dict)(root),
    )
    return JsonResponse(info.model_dump(mode="json", by_alias=True, exclude_none=True))


def _remote_app_info(remote: Any) -> dict[str, Any]:
    """A remote app's info, as its own server gives it (502 with the reason if it cannot)."""
    from ..remote.client import RemoteClient, RemoteError

    async def fetch() -> dict[str, Any]:
        async with RemoteClient(remote) as client:
            return await client.app_info()

    try:
        return async_to_sync(fetch)()
    except RemoteError as exc:
        raise BadGateway(str(exc)) from exc


@api_view("GET", public=True)
def health(request: HttpRequest) -> JsonResponse:
    """Liveness, unauthenticated as in ADK (load balancers call it)."""
    return JsonResponse(Health(status="ok").model_dump())


@api_view("GET", public=True)
def version(request: HttpRequest) -> JsonResponse:
    """The ADK version adkweb runs (ADK's /version, unauthenticated as there)."""
    from google.adk import __version__

    v = sys.version_info
    return JsonResponse(
        Version(version=__version__, language="python", language_version=f"{v.major}.{v.minor}.{v.micro}").model_dump()
    )
