"""Nothing erased: deleting a conversation archives it (ADK's API answers 404, the pages and lists
forget it) while its tickets, responses and events stay; a decision keeps who made it when the user
is renamed or deleted; the database refuses to cascade-delete the record."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db.models import ProtectedError

from agents_app import services as agent_services
from agents_app.models import AdkSession, StoredEvent, Turn
from approvals import services
from approvals.models import PendingCall, Response, TicketActivity
from tests.approvals_factories import session_for, ticket

API = "/api/adk/apps/reimbursement_agent/users/requester/sessions"


def _decided_conversation(demo):
    """A conversation with an event, a decided ticket (its turn done) and an open ticket."""
    session = session_for(user_id="requester")
    StoredEvent.objects.create(session=session, event_id="e1", author="user", timestamp=1.0, data={"id": "e1"})
    decided = ticket(session=session)
    services.ticket_approve(ticket=decided, actor=demo["approver"], comment="fine")
    Turn.objects.filter(session=session).update(status=Turn.Status.DONE)
    waiting = ticket(session=session)
    return session, decided, waiting


def test_deleting_a_session_archives_it(demo, client):
    session, decided, waiting = _decided_conversation(demo)
    client.force_login(demo["requester"])
    assert client.get(f"{API}/{session.session_id}").status_code == 200

    r = client.delete(f"{API}/{session.session_id}")
    assert r.status_code == 200, r.content

    # Gone from ADK's API, as ADK expects, and from the lists and pages.
    r = client.get(f"{API}/{session.session_id}")
    assert (r.status_code, r.json()) == (404, {"detail": f"Session not found: {session.session_id}"})
    again = client.delete(f"{API}/{session.session_id}")  # as ADK: a retried DELETE is done, not an error
    assert (again.status_code, again.json()) == (200, None)
    assert session.session_id not in {s["id"] for s in client.get(API).json()}
    assert client.get(f"/sessions/{session.pk}/").status_code == 404
    assert f"/sessions/{session.pk}/" not in client.get("/sessions/").content.decode()
    assert client.get(f"/tickets/{decided.pk}/").status_code == 404  # the requester: it is gone

    # Kept for the audit trail: the session row, its event, tickets and responses.
    row = AdkSession.all_objects.get(pk=session.pk)
    assert row.archived_at is not None and row.archived_by == "requester"
    assert row.status == "idle"  # its open ticket was cancelled: nobody owes anything
    assert StoredEvent.objects.filter(session_id=session.pk).count() == 1
    assert PendingCall.objects.filter(session_id=session.pk).count() == 2
    assert Response.objects.filter(pending_call=decided).count() == 1
    waiting.refresh_from_db()
    assert waiting.status == PendingCall.Status.CANCELLED  # nobody will answer it now
    assert TicketActivity.objects.get(ticket=waiting, kind="cancelled").message.startswith(
        "Cancelled: its conversation was deleted by requester"
    )
    # Approvers see the archived ticket (read-only, closed); their inbox no longer lists it.
    client.force_login(demo["approver"])
    page = client.get(f"/tickets/{decided.pk}/").content.decode()
    assert "its conversation was deleted" in page and "by requester" in page
    assert f'href="/sessions/{session.pk}/"' not in page
    assert f"/tickets/{waiting.pk}/" not in client.get("/?status=all").content.decode()
    assert client.get(f"/api/pending-calls/{decided.pk}").status_code == 200


def test_a_deleted_session_id_can_be_created_again(demo, client):
    session, _, _ = _decided_conversation(demo)
    client.force_login(demo["requester"])
    assert client.delete(f"{API}/{session.session_id}").status_code == 200
    r = client.post(API, {"sessionId": session.session_id}, content_type="application/json")
    assert r.status_code == 200, r.content
    assert r.json()["events"] == []  # a new session: the archived one's events are not in it
    assert AdkSession.all_objects.filter(session_id=session.session_id).count() == 2


def test_a_busy_session_is_not_archived(demo, client):
    session = session_for(user_id="requester")
    agent_services.message_send(session=session, text="hello", streaming=False)  # queued, no worker
    client.force_login(demo["requester"])
    r = client.delete(f"{API}/{session.session_id}")
    assert r.status_code == 409 and "working" in r.json()["detail"]
    assert AdkSession.objects.filter(pk=session.pk).exists()


def test_the_database_refuses_to_cascade(demo):
    session, decided, _ = _decided_conversation(demo)
    with pytest.raises(ProtectedError):
        AdkSession.all_objects.filter(pk=session.pk).delete()
    with pytest.raises(ProtectedError):
        PendingCall.objects.filter(pk=decided.pk).delete()
    assert PendingCall.objects.filter(pk=decided.pk).exists()


def test_a_deleted_user_keeps_their_decisions(demo, client):
    approver = demo["approver"]
    approver.first_name, approver.last_name = "Ann", "Lee"
    approver.save()
    call = ticket()
    response = services.ticket_reject(ticket=call, actor=approver, reason="no receipt")
    approver.username = "ann.renamed"
    approver.save()
    approver.delete()

    response.refresh_from_db()
    assert response.actor_id is None
    assert (response.actor_username, response.actor_name) == ("approver", "Ann Lee")
    assert response.decided_by == "Ann Lee (approver)"
    client.force_login(demo["admin"])
    page = client.get(f"/tickets/{call.pk}/").content.decode()
    assert "Ann Lee (approver)" in page and "user since deleted" in page
    body = client.get(f"/api/pending-calls/{call.pk}").json()
    assert body["responses"][0]["actor"] == "approver" and body["responses"][0]["actorName"] == "Ann Lee"


def test_admin_cannot_delete_or_edit_tickets_and_responses(demo, client):
    call = ticket()
    services.ticket_approve(ticket=call, actor=demo["approver"])
    admin_user = demo["admin"]
    assert admin_user.is_superuser
    client.force_login(admin_user)
    base = f"/admin/approvals/pendingcall/{call.pk}"
    assert client.get(f"{base}/delete/").status_code == 403
    assert client.post(f"{base}/delete/", {"post": "yes"}).status_code == 403
    assert client.get("/admin/approvals/pendingcall/add/").status_code == 403
    page = client.get(f"{base}/change/")
    assert page.status_code == 200 and b'name="_save"' not in page.content  # read-only view
    r = client.post(f"{base}/change/", {"status": "rejected"})
    assert r.status_code == 403
    listing = client.get("/admin/approvals/pendingcall/").content.decode()
    assert "delete_selected" not in listing
    assert PendingCall.objects.get(pk=call.pk).status == "approved"
    assert Response.objects.filter(pending_call=call).count() == 1
    assert not User.objects.filter(pk=admin_user.pk, is_superuser=False).exists()


def test_admin_delete_of_a_session_archives_it(demo, client):
    session, decided, _ = _decided_conversation(demo)
    client.force_login(demo["admin"])
    url = f"/admin/agents_app/adksession/{session.pk}/delete/"
    confirm = client.get(url)
    assert confirm.status_code == 200 and b"archived" in confirm.content
    assert client.post(url, {"post": "yes"}).status_code == 302
    row = AdkSession.all_objects.get(pk=session.pk)
    assert row.archived_at is not None and row.archived_by == "admin"
    assert Response.objects.filter(pending_call=decided).count() == 1
    assert client.get(f"/admin/agents_app/adksession/{session.pk}/change/").status_code == 302  # gone: not found
