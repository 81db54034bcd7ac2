"""ADK REST: a session's artifacts (list, save, load, versions, metadata, delete), as `adk api_server`
serves them, on adkweb's artifact service (Django storage)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, JsonResponse
from google.adk.errors.input_validation_error import InputValidationError

from adkweb.api import api_view
from adkweb.errors import Invalid, NotFound, Unprocessable

from ..adk_services import artifact_service
from .schemas import SaveArtifactRequest, parse_body
from .sessions import check_user


def _json(value: Any) -> Any:
    if isinstance(value, list):
        return [_json(v) for v in value]
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


async def _call(request: HttpRequest, user_id: str, op: Callable[..., Awaitable[Any]], **kwargs: Any) -> Any:
    """Check the caller may use this user's artifacts, then run one artifact-service call."""
    await sync_to_async(check_user)(request, user_id, write=request.method != "GET")
    try:
        return await op(user_id=user_id, **kwargs)
    except InputValidationError as exc:
        raise Invalid(str(exc)) from exc


def _version(version_id: str) -> int | None:
    if version_id == "latest":
        return None
    try:
        return int(version_id)
    except ValueError:
        raise Unprocessable(
            [{"type": "int_parsing", "loc": ["path", "version_id"], "msg": "Invalid version ID", "input": version_id}]
        ) from None


@api_view("GET", "POST")
async def artifacts(request: HttpRequest, app_name: str, user_id: str, session_id: str) -> JsonResponse:
    """GET: the artifact names of a session (and the user's "user:" ones); POST: save a new version."""
    svc, where = artifact_service(), {"app_name": app_name, "session_id": session_id}
    if request.method == "GET":
        return JsonResponse(await _call(request, user_id, svc.list_artifact_keys, **where), safe=False)
    body = await sync_to_async(parse_body)(SaveArtifactRequest, request)
    version = await _call(
        request,
        user_id,
        svc.save_artifact,
        **where,
        filename=body.filename,
        artifact=body.artifact,
        custom_metadata=body.custom_metadata,
    )
    meta = await svc.get_artifact_version(user_id=user_id, **where, filename=body.filename, version=version)
    return JsonResponse(_json(meta))


@api_view("GET", "DELETE")
async def artifact(request: HttpRequest, app_name: str, user_id: str, session_id: str, name: str) -> JsonResponse:
    """GET: the latest version (or `?version=N`) as a Part; DELETE: every version."""
    svc, where = artifact_service(), {"app_name": app_name, "session_id": session_id, "filename": name}
    if request.method == "DELETE":
        await _call(request, user_id, svc.delete_artifact, **where)
        return JsonResponse(None, safe=False)
    raw = request.GET.get("version")
    version = None if raw in (None, "") else _version(raw)
    return _part(await _call(request, user_id, svc.load_artifact, **where, version=version))


def _part(part: Any) -> JsonResponse:
    if part is None:
        raise NotFound("Artifact not found")
    return JsonResponse(_json(part))


@api_view("GET")
async def versions(request: HttpRequest, app_name: str, user_id: str, session_id: str, name: str) -> JsonResponse:
    """The version numbers of an artifact."""
    where = {"app_name": app_name, "session_id": session_id, "filename": name}
    return JsonResponse(await _call(request, user_id, artifact_service().list_versions, **where), safe=False)


@api_view("GET")
async def versions_metadata(
    request: HttpRequest, app_name: str, user_id: str, session_id: str, name: str
) -> JsonResponse:
    """Every version's ArtifactVersion (number, URI, MIME type, metadata, time)."""
    where = {"app_name": app_name, "session_id": session_id, "filename": name}
    return JsonResponse(
        _json(await _call(request, user_id, artifact_service().list_artifact_versions, **where)), safe=False
    )


@api_view("GET")
async def version(
    request: HttpRequest, app_name: str, user_id: str, session_id: str, name: str, version_id: str
) -> JsonResponse:
    """One version (a number, or "latest") as a Part."""
    where = {"app_name": app_name, "session_id": session_id, "filename": name, "version": _version(version_id)}
    return _part(await _call(request, user_id, artifact_service().load_artifact, **where))


@api_view("GET")
async def version_metadata(
    request: HttpRequest, app_name: str, user_id: str, session_id: str, name: str, version_id: str
) -> JsonResponse:
    """One version's ArtifactVersion."""
    where = {"app_name": app_name, "session_id": session_id, "filename": name, "version": _version(version_id)}
    meta = await _call(request, user_id, artifact_service().get_artifact_version, **where)
    if meta is None:
        raise NotFound("Artifact version not found")
    return JsonResponse(_json(meta))
