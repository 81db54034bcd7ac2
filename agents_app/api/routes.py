"""ADK's REST routes (`adk api_server`'s), mounted under /api/adk/: the table the URL patterns and
the OpenAPI document are generated from."""

from __future__ import annotations

from google.adk.artifacts.base_artifact_service import ArtifactVersion
from google.adk.events.event import Event
from google.adk.sessions.session import Session
from google.genai import types

from adkweb.routes import Op, Route

from . import apps, artifacts, run, sessions
from .schemas import (
    AppInfo,
    CreateSessionRequest,
    Health,
    ListAppsResponse,
    RunAgentRequest,
    SaveArtifactRequest,
    UpdateMemoryRequest,
    UpdateSessionRequest,
    Version,
)

USER_SESSIONS = "apps/<str:app_name>/users/<str:user_id>/sessions"
SESSION = USER_SESSIONS + "/<str:session_id>"
ARTIFACTS = SESSION + "/artifacts"
ARTIFACT = ARTIFACTS + "/<path:name>"
RUN_ERRORS = (401, 403, 404, 409, 413, 422, 429, 400)

ROUTES = [
    Route("health", apps.health, "health", (Op("GET", "Liveness (no authentication)", response=Health, errors=()),)),
    Route(
        "version", apps.version, "version", (Op("GET", "ADK version (no authentication)", response=Version, errors=()),)
    ),
    Route(
        "list-apps",
        apps.list_apps,
        "list-apps",
        (
            Op(
                "GET",
                "The enabled apps: names, or ADK's ListAppsResponse with ?detailed=true",
                response=list[str] | ListAppsResponse,
                query={"detailed": "true: every app's name, root agent, description, language"},
                errors=(401,),
            ),
        ),
    ),
    Route(
        "apps/<str:app_name>/app-info",
        apps.app_info,
        "app-info",
        (
            Op(
                "GET",
                "An app's agents: instructions, tool declarations, sub-agents (a remote app: its server's answer)",
                response=AppInfo,
                errors=(400, 401, 403, 404, 502),
            ),
        ),
    ),
    Route(
        USER_SESSIONS,
        sessions.sessions,
        "sessions",
        (
            Op("GET", "The user's sessions of an app, without events", response=list[Session]),
            Op(
                "POST",
                "Create a session (body optional)",
                request=CreateSessionRequest,
                response=Session,
                errors=(400, 401, 403, 404, 409, 422),
            ),
        ),
    ),
    Route(
        SESSION,
        sessions.session,
        "session",
        (
            Op("GET", "A session with its events, oldest first", response=Session),
            Op(
                "POST",
                "Create a session with this id; the body is its initial state (ADK's deprecated form)",
                response=Session,
                errors=(401, 403, 404, 409, 422),
            ),
            Op(
                "PATCH",
                "Change the session's state without running the agent",
                request=UpdateSessionRequest,
                response=Session,
                errors=(401, 403, 404, 409, 422),
            ),
            Op("DELETE", "Delete a session (409 while a turn runs; none there: done)", errors=(401, 403, 409)),
        ),
    ),
    Route(
        "apps/<str:app_name>/users/<str:user_id>/memory",
        sessions.memory,
        "memory",
        (
            Op(
                "PATCH",
                "Add a session to the user's memory (ADKWEB_MEMORY_SERVICE)",
                request=UpdateMemoryRequest,
                errors=(401, 403, 404, 422),
            ),
        ),
    ),
    Route(
        ARTIFACTS,
        artifacts.artifacts,
        "artifacts",
        (
            Op("GET", "The session's artifact names (and the user's 'user:' ones)", response=list[str]),
            Op(
                "POST",
                "Save a new version of an artifact",
                request=SaveArtifactRequest,
                response=ArtifactVersion,
                errors=(400, 401, 403, 422),
            ),
        ),
    ),
    Route(
        ARTIFACT + "/versions/<str:version_id>/metadata",
        artifacts.version_metadata,
        "artifact-version-metadata",
        (
            Op(
                "GET",
                "One version's metadata (a number or 'latest')",
                response=ArtifactVersion,
                errors=(400, 401, 403, 404, 422),
            ),
        ),
    ),
    Route(
        ARTIFACT + "/versions/metadata",
        artifacts.versions_metadata,
        "artifact-versions-metadata",
        (Op("GET", "Every version's metadata", response=list[ArtifactVersion]),),
    ),
    Route(
        ARTIFACT + "/versions/<str:version_id>",
        artifacts.version,
        "artifact-version",
        (
            Op(
                "GET",
                "One version as a Part (a number or 'latest')",
                response=types.Part,
                errors=(400, 401, 403, 404, 422),
            ),
        ),
    ),
    Route(
        ARTIFACT + "/versions",
        artifacts.versions,
        "artifact-versions",
        (Op("GET", "The version numbers", response=list[int]),),
    ),
    Route(
        ARTIFACT,
        artifacts.artifact,
        "artifact",
        (
            Op(
                "GET",
                "The latest version (or ?version=N) as a Part",
                response=types.Part,
                query={"version": "a version number"},
            ),
            Op("DELETE", "Delete every version", errors=(400, 401, 403)),
        ),
    ),
    Route(
        "run",
        run.run,
        "run",
        (
            Op(
                "POST",
                "Run the agent (queue a turn, wait for it): the events it stored",
                request=RunAgentRequest,
                response=list[Event],
                errors=RUN_ERRORS,
            ),
        ),
    ),
    Route(
        "run_sse",
        run.run_sse,
        "run-sse",
        (
            Op(
                "POST",
                "Run the agent and stream its events (data: <Event JSON>), partial chunks with streaming: true",
                request=RunAgentRequest,
                response=Event,
                errors=RUN_ERRORS,
                stream=True,
            ),
        ),
    ),
]
