"""ADK's REST routes (`adk api_server`), mounted under /api/adk/."""

from django.urls import path

from .api import run, sessions

app_name = "adk_api"

urlpatterns = [
    path("list-apps", sessions.list_apps, name="list-apps"),
    path("apps/<str:app_name>/users/<str:user_id>/sessions", sessions.sessions, name="sessions"),
    path("apps/<str:app_name>/users/<str:user_id>/sessions/<str:session_id>", sessions.session, name="session"),
    path("run", run.run, name="run"),
    path("run_sse", run.run_sse, name="run-sse"),
]
