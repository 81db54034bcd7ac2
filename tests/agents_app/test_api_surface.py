"""The API surface beyond the comparison with ADK: the OpenAPI document and docs page generated from the
route tables, PATCH while the agent works, and artifacts on the conversation page."""

from __future__ import annotations

import json

from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from google.genai import types

from adkweb.api_docs import document
from agents_app import artifacts, services
from agents_app.api.routes import ROUTES as ADK_ROUTES
from agents_app.models import Turn
from approvals import services as approvals
from approvals.api_routes import ROUTES as APPROVAL_ROUTES
from approvals.api_routes import Ticket, TicketPage, TicketResponse
from notifications.api_routes import ROUTES as WEBHOOK_ROUTES
from tests.approvals_factories import ticket


def _client(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


def _api_patterns() -> set[str]:
    """Every URL pattern under /api/, as OpenAPI paths."""
    out: set[str] = set()

    def walk(patterns, prefix):
        for p in patterns:
            route = prefix + str(p.pattern)
            if isinstance(p, URLResolver):
                walk(p.url_patterns, route)
            elif isinstance(p, URLPattern) and route.startswith("api/"):
                out.add("/" + route)

    walk(get_resolver().url_patterns, "")
    return out


def test_the_openapi_document_covers_every_api_route_with_the_views_own_methods(db):
    doc = Client().get("/api/openapi.json").json()
    assert doc == json.loads(json.dumps(document()))
    import re

    paths = {re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", p) for p in _api_patterns()} - {"/api/openapi.json", "/api/docs/"}
    assert paths == set(doc["paths"])
    for prefix, routes in (("/api/adk/", ADK_ROUTES), ("/api/", APPROVAL_ROUTES), ("/api/", WEBHOOK_ROUTES)):
        for route in routes:
            url = prefix + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route.path)
            assert set(doc["paths"][url]) == {m.lower() for m in route.view.api_methods}, url
    run = doc["paths"]["/api/adk/run"]["post"]
    assert run["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/RunAgentRequest"
    }
    assert run["responses"]["422"]["content"]["application/json"]["schema"]["$ref"].endswith("/ValidationErrorBody")
    assert {"Event", "Session", "Content", "ArtifactVersion", "AppInfo", "Ticket", "TicketResponse"} <= set(
        doc["components"]["schemas"]
    )
    assert doc["paths"]["/api/adk/health"]["get"]["security"] == []  # public, as in ADK


def test_approvals_api_answers_fit_the_documented_models(demo):
    t = ticket(invocation_id="inv-1")
    c = _client(demo["approver"])
    TicketPage.model_validate(c.get("/api/pending-calls?status=all").json())
    Ticket.model_validate(c.get(f"/api/pending-calls/{t.pk}").json())
    r = c.post(
        f"/api/pending-calls/{t.pk}/responses",
        {"response": {"status": "in_progress"}, "final": False},
        "application/json",
    )
    assert r.status_code == 201
    TicketResponse.model_validate(r.json())
    assigned = c.post(f"/api/pending-calls/{t.pk}/assign", {"assignee": "me"}, "application/json").json()
    Ticket.model_validate(assigned)
    detail = Ticket.model_validate(c.get(f"/api/pending-calls/{t.pk}").json())
    assert detail.responses and detail.assigned_to == "approver"


def test_the_docs_page_lists_both_apis(demo):
    html = _client(demo["requester"]).get("/api/docs/").content.decode()
    assert "/api/adk/run_sse" in html and "/api/pending-calls/{ticket_id}/approve" in html
    assert "RunAgentRequest" in html and "/api/openapi.json" in html


def test_patch_while_the_agent_works_is_refused_and_changes_nothing(demo):
    session = services.session_create(app_name="stock_agent", user_id="requester", state={"k": 1})
    Turn.objects.create(session=session, kind="message", content={"role": "user", "parts": [{"text": "hi"}]})
    c = _client(demo["requester"])
    url = f"/api/adk/apps/stock_agent/users/requester/sessions/{session.session_id}"
    r = c.patch(url, {"stateDelta": {"k": 2}}, "application/json")
    assert r.status_code == 409 and "working in this session" in r.json()["detail"]
    assert c.get(url).json()["state"] == {"k": 1}


def test_patch_records_the_change_as_a_user_event_and_keeps_no_temp_keys(demo):
    session = services.session_create(app_name="stock_agent", user_id="requester")
    c = _client(demo["requester"])
    url = f"/api/adk/apps/stock_agent/users/requester/sessions/{session.session_id}"
    body = c.patch(url, {"stateDelta": {"k": 2, "temp:t": 1, "user:u": 3}}, "application/json").json()
    assert body["state"] == {"k": 2, "temp:t": 1, "user:u": 3}  # the answer shows the run's view, as ADK's does
    [event] = body["events"]
    assert event["author"] == "user" and event["invocationId"].startswith("p-")
    assert c.get(url).json()["state"] == {"k": 2, "user:u": 3}


def _save(session, filename: str, part: types.Part) -> None:
    scope = {"app_name": session.app_name, "user_id": session.user_id, "session_id": session.session_id}
    artifacts.save(scope={**scope, "filename": filename}, part=part, custom_metadata=None)


def test_the_conversation_page_lists_artifacts_previews_images_and_downloads_them(demo):
    session = services.session_create(app_name="stock_agent", user_id="requester")
    png = b"\x89PNG\r\n\x1a\n-chart"
    _save(session, "chart.png", types.Part(inline_data=types.Blob(mime_type="image/png", data=png)))
    _save(session, "chart.png", types.Part(inline_data=types.Blob(mime_type="image/png", data=png + b"2")))
    svg = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
    _save(session, "logo.svg", types.Part(inline_data=types.Blob(mime_type="image/svg+xml", data=svg)))
    c = _client(demo["requester"])
    page = c.get(f"/sessions/{session.pk}/").content.decode()
    assert 'id="conversation-artifacts"' in page and "version 1 of 2" in page
    base = f"/sessions/{session.pk}/artifacts/"
    assert f'<img src="{base}chart.png?inline=1&amp;version=1"' in page
    assert f'<img src="{base}logo.svg' not in page, "SVG can carry script: never previewed"

    shown = c.get(base + "chart.png?inline=1")
    assert shown.content == png + b"2" and shown["Content-Type"] == "image/png"
    assert shown["Content-Disposition"].startswith("inline") and "sandbox" in shown["Content-Security-Policy"]
    first = c.get(base + "chart.png?version=0")
    assert first.content == png and first["Content-Disposition"] == 'attachment; filename="chart.png"'
    svg_inline = c.get(base + "logo.svg?inline=1")
    assert (
        svg_inline["Content-Disposition"].startswith("attachment") and svg_inline["X-Content-Type-Options"] == "nosniff"
    )
    assert c.get(base + "chart.png?version=x").status_code == 400
    assert c.get(base + "chart.png?version=7").status_code == 404


def test_answers_fit_after_a_final_is_refused_unchanged(demo):
    """A second final answer through the approvals API stays a 409 (the /api/adk one is in the comparison)."""
    t = ticket(invocation_id="inv-1")
    approvals.ticket_approve(ticket=t, actor=demo["approver"])
    r = _client(demo["approver"]).post(f"/api/pending-calls/{t.pk}/reject", {}, "application/json")
    assert r.status_code == 409
