"""HEAD on the dashboard's pages: answered as GET is (same status and headers, no body), where the pages
said 405 (`require_GET`), so a monitor's or a link checker's HEAD on the inbox read as an error; never the
view's other branch (a form page's POST)."""

from __future__ import annotations

import pytest
from django.test import Client

from agents_app import services
from agents_app.models import AdkSession

PAGES = [
    "/",
    "/sessions/",
    "/sessions/new/",
    "/agents/",
    "/policies/",
    "/policies/new/",
    "/grants/",
    "/audit/",
    "/audit/export.csv",
    "/api/docs/",
    "/settings/notifications/",
]


@pytest.fixture
def admin(demo) -> Client:
    client = Client()
    client.force_login(demo["admin"])
    return client


@pytest.mark.parametrize("path", PAGES)
def test_head_answers_as_get_without_a_body(admin, path):
    got, head = admin.get(path), admin.head(path)
    assert got.status_code == 200, path
    assert head.status_code == 200, (path, head.status_code)
    assert b"".join(head.streaming_content if head.streaming else [head.content]) == b""
    assert head["Content-Type"] == got["Content-Type"]


def test_head_on_a_conversation_and_its_events(admin, demo):
    session = services.session_create(app_name="stock_agent", user_id="admin")
    for path in (f"/sessions/{session.pk}/", f"/sessions/{session.pk}/events/?before=1000"):
        assert admin.head(path).status_code == admin.get(path).status_code == 200, path


def test_head_on_a_form_page_runs_no_post_branch(admin):
    before = AdkSession.objects.count()
    assert admin.head("/sessions/new/").status_code == 200
    assert AdkSession.objects.count() == before


def test_head_is_refused_as_get_is(demo):
    anonymous = Client()
    assert anonymous.head("/").status_code == anonymous.get("/").status_code == 302
    observer = Client()
    observer.force_login(demo["observer"])
    assert observer.head("/policies/new/").status_code == observer.get("/policies/new/").status_code == 403
    assert Client().head("/sessions/1/").status_code == 302
