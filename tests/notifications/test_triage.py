"""Bulk decisions and saved views, through plain forms (no JavaScript), as the inbox sends them."""

from __future__ import annotations

from approvals import services as approvals
from approvals.models import PendingCall, Response
from notifications.models import SavedView
from tests.approvals_factories import session_for, ticket


def _tickets(n: int) -> list[PendingCall]:
    return [ticket(args={"purpose": f"trip {i}", "amount": 150.0 + i}) for i in range(n)]


def test_bulk_asks_once_showing_how_many_and_which_then_decides_each(demo, client):
    calls = _tickets(3)
    client.force_login(demo["approver"])
    ids = [c.pk for c in calls]
    r = client.post("/inbox/bulk/", {"action": "approve", "ticket": ids})
    html = r.content.decode()
    assert r.status_code == 200 and "Approve 3 tickets?" in html and Response.objects.count() == 0
    for c in calls:
        assert f"#{c.pk}" in html and f"trip {calls.index(c)}" in html
    r = client.post("/inbox/bulk/", {"action": "approve", "ticket": ids, "confirm": "1"})
    html = r.content.decode()
    assert r.status_code == 200 and "3 of 3 approved" in html
    for c in calls:
        c.refresh_from_db()
        assert c.status == "approved" and c.closed_by == demo["approver"]
    assert sorted(Response.objects.values_list("pending_call_id", "action", "actor__username")) == [
        (pk, "approve", "approver") for pk in sorted(ids)
    ]
    assert len({r.turn_id for r in Response.objects.all()}) == 3, "one turn per ticket: each agent resumes"


def test_bulk_reports_each_refusal_and_lets_the_others_through(demo, client):
    open_one, closed_one = _tickets(2)
    approvals.ticket_reject(ticket=closed_one, actor=demo["admin"], reason="dup")
    schema_input = ticket(session=session_for(), kind="input")  # needs an answer that fits its form
    client.force_login(demo["approver"])
    ids = [open_one.pk, closed_one.pk, schema_input.pk, 999999]
    r = client.post("/inbox/bulk/", {"action": "approve", "ticket": ids, "confirm": "1"})
    html = r.content.decode()
    assert r.status_code == 200 and "1 of 4 approved" in html
    assert f"Ticket #{closed_one.pk} is already closed (rejected by admin). Nothing was sent." in html
    assert "This ticket asks for input matching its schema" in html and "Ticket #999999 was not found." in html
    assert PendingCall.objects.get(pk=open_one.pk).status == "approved"
    assert PendingCall.objects.get(pk=schema_input.pk).status == "pending"


def test_bulk_reject_needs_a_reason_that_each_agent_receives(demo, client):
    calls = _tickets(2)
    client.force_login(demo["approver"])
    ids = [c.pk for c in calls]
    r = client.post("/inbox/bulk/", {"action": "reject", "ticket": ids, "confirm": "1", "reason": " "})
    assert r.status_code == 400 and "A rejection needs a reason" in r.content.decode()
    assert Response.objects.count() == 0
    r = client.post("/inbox/bulk/", {"action": "reject", "ticket": ids, "confirm": "1", "reason": "over budget"})
    assert "2 of 2 rejected" in r.content.decode()
    assert [r.payload for r in Response.objects.all()] == [{"status": "rejected", "reason": "over budget"}] * 2


def test_bulk_refuses_non_approvers_and_bad_input(demo, client):
    call = ticket()
    client.force_login(demo["requester"])
    r = client.post("/inbox/bulk/", {"action": "approve", "ticket": [call.pk], "confirm": "1"})
    assert r.status_code == 403 and "Only approvers decide tickets." in r.content.decode()
    client.force_login(demo["approver"])
    for body, message in [
        ({"action": "approve"}, "Select at least one ticket"),
        ({"action": "approve", "ticket": ["1; drop"]}, "Not a ticket number"),
        ({"action": "approve", "ticket": list(range(1, 102))}, "At most 100 tickets at once"),
        ({"action": "delete", "ticket": [call.pk]}, "Bad request"),
    ]:
        r = client.post("/inbox/bulk/", {**body, "confirm": "1"})
        assert r.status_code == 400 and message in r.content.decode(), body
    assert Response.objects.count() == 0


def test_bulk_answers_htmx_with_the_dialog_fragment(demo, client):
    call = ticket()
    client.force_login(demo["approver"])
    r = client.post("/inbox/bulk/", {"action": "approve", "ticket": [call.pk]}, HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert r.status_code == 200 and "<html" not in html and "Approve 1 ticket?" in html
    assert "data-triage-form" in html  # triage.js sends it with htmx into the dialog
    assert "{#" not in html and "triage.js" not in html  # a template comment, not text (it showed in the dialog)


def test_the_inbox_rows_carry_checkboxes_for_the_bulk_form(demo, client):
    open_call, closed_call = _tickets(2)
    approvals.ticket_approve(ticket=closed_call, actor=demo["approver"])
    client.force_login(demo["approver"])
    html = client.get("/?status=all").content.decode()
    assert '<form id="bulk-form" method="post" action="/inbox/bulk/"' in html
    assert f'name="ticket" value="{open_call.pk}" form="bulk-form" aria-label="Select ticket #{open_call.pk}">' in html
    assert f'value="{closed_call.pk}" form="bulk-form" aria-label="Select ticket #{closed_call.pk}" disabled>' in html
    assert "js/triage.js" in html and "Keyboard shortcuts" in html


def test_saved_view_is_in_the_nav_and_can_be_replaced_and_deleted(demo, client):
    client.force_login(demo["approver"])
    r = client.post("/inbox/views/", {"name": "Big trips", "query": "q=trip&status=all&page=3&bogus=1"})
    assert r.status_code == 302 and r["Location"] == "/?q=trip&status=all"
    view = SavedView.objects.get(user=demo["approver"])
    assert view.query == "q=trip&status=all"
    nav = client.get("/").content.decode()
    assert '<a href="/?q=trip&amp;status=all" class="saved-view" title="Saved view">Big trips</a>' in nav
    client.post("/inbox/views/", {"name": "Big trips", "query": "mine=1"})
    assert list(SavedView.objects.values_list("name", "query")) == [("Big trips", "mine=1")]
    client.force_login(demo["admin"])  # another approver neither sees nor deletes it
    assert 'class="saved-view"' not in client.get("/").content.decode()
    assert client.post(f"/inbox/views/{view.pk}/delete/").status_code == 404
    client.force_login(demo["approver"])
    assert client.post(f"/inbox/views/{view.pk}/delete/").status_code == 302
    assert not SavedView.objects.exists()


def test_saved_views_need_a_name_and_are_for_approvers(demo, client):
    client.force_login(demo["approver"])
    r = client.post("/inbox/views/", {"name": "", "query": "q=x"}, follow=True)
    assert "Give the view a name" in r.content.decode() and not SavedView.objects.exists()
    client.force_login(demo["requester"])
    assert client.post("/inbox/views/", {"name": "mine", "query": ""}).status_code == 403
    assert not SavedView.objects.exists()


def test_filters_longer_than_a_saved_view_holds_are_refused_not_a_500(demo, client):
    """The view keeps the filters' canonical query string (600 characters), percent-encoded: a search of
    150 "é" posted as it is (300 bytes) is 1,800 characters once encoded, and PostgreSQL refused the row
    (DataError, a 500; SQLite kept it whole). Now it is refused with a message, and nothing is saved."""
    client.force_login(demo["approver"])
    r = client.post("/inbox/views/", {"name": "Long", "query": "q=" + "é" * 150}, follow=True)
    assert r.status_code == 200 and "too long to save" in r.content.decode()
    assert not SavedView.objects.exists()
