"""The inbox and ticket pages: what each role sees, every action, and every refusal."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from agents_app.models import Turn
from approvals.models import PendingCall, Response
from tests.approvals_factories import session_for, ticket


def login(client: Client, user) -> Client:
    client.force_login(user)
    return client


def act(call, action):
    return reverse("approvals:ticket-act", args=[call.pk, action])


# -- login and roles -------------------------------------------------------------------------
@pytest.mark.parametrize("url", ["/", "/tickets/1/"])
def test_pages_need_login(client, db, url):
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_login_page_renders_and_logs_in(client, demo):
    page = client.get("/accounts/login/")
    assert page.status_code == 200 and b"Log in" in page.content
    response = client.post("/accounts/login/", {"username": "approver", "password": "approver-demo"})
    assert response.status_code == 302 and response["Location"] == "/"


def test_inbox_redirects_non_approvers_to_their_conversations(client, demo):
    response = login(client, demo["requester"]).get("/")
    assert response.status_code == 302 and response["Location"] == "/sessions/"


# -- inbox -----------------------------------------------------------------------------------
def test_inbox_lists_open_tickets_readably(client, demo):
    call = ticket()
    closed = ticket(status="approved", args={"purpose": "taxi", "amount": 350})
    page = login(client, demo["approver"]).get("/")
    html = page.content.decode()
    assert page.status_code == 200 and "<title>Inbox · adkweb</title>" in html
    assert f'id="pending-call-{call.pk}"' in html and "meals · $200.00" in html and "requester" in html
    assert f'id="pending-call-{closed.pk}"' not in html
    assert 'ws-connect="/ws/approvals/?changed=' in html and 'id="nav-open-count"' in html


def test_inbox_filters_search_sort_and_kind(client, demo):
    meals = ticket()
    transfer = ticket(kind="confirmation", session=session_for(app_name="transfer_agent"))
    c = login(client, demo["approver"])
    assert f"pending-call-{transfer.pk}" not in c.get("/?agent=reimbursement_agent").content.decode()
    html = c.get("/?kind=confirmation").content.decode()
    assert f"pending-call-{transfer.pk}" in html and f"pending-call-{meals.pk}" not in html
    assert "transfer_money: $500.00 · Bob" in html
    html = c.get("/?q=meals").content.decode()
    assert f"pending-call-{meals.pk}" in html and f"pending-call-{transfer.pk}" not in html
    html = c.get("/?sort=oldest").content.decode()
    assert html.index(f"pending-call-{meals.pk}") < html.index(f"pending-call-{transfer.pk}")
    html = c.get("/?tool=transfer_money&status=all").content.decode()
    assert f"pending-call-{transfer.pk}" in html and f"pending-call-{meals.pk}" not in html


def test_inbox_mine_means_assigned_answered_or_closed_by_me(client, demo):
    assigned = ticket(assigned_to=demo["approver"])
    updated = ticket()
    Response.objects.create(pending_call=updated, action="update", payload={}, final=False, actor=demo["approver"])
    other = ticket()
    html = login(client, demo["approver"]).get("/?mine=1").content.decode()
    assert f"pending-call-{assigned.pk}" in html and f"pending-call-{updated.pk}" in html
    assert f"pending-call-{other.pk}" not in html


def test_inbox_htmx_request_gets_only_the_results_fragment(client, demo):
    ticket()
    response = login(client, demo["approver"]).get("/?q=meals", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="inbox-results")
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="inbox-results"') and "<html" not in html
    assert 'ws-connect="/ws/approvals/?q=meals&amp;changed=' in html


def test_inbox_paginates_with_a_bounded_number_of_queries(client, demo, django_assert_max_num_queries):
    session = session_for()
    for _ in range(60):
        ticket(session=session)
    c = login(client, demo["approver"])
    with django_assert_max_num_queries(12):
        page2 = c.get("/?page=2").content.decode()
    assert "Page 2 of 3" in page2 and page2.count('id="pending-call-') == 25


def test_model_output_is_escaped(client, demo):
    ticket(args={"purpose": "<script>alert(1)</script>", "amount": 1})
    html = login(client, demo["approver"]).get("/").content.decode()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html


# -- ticket page -----------------------------------------------------------------------------
def test_ticket_page_shows_call_initial_response_and_actions(client, demo):
    call = ticket()
    html = login(client, demo["approver"]).get(f"/tickets/{call.pk}/").content.decode()
    assert f"Ticket #{call.pk} · ask_for_approval · adkweb" in html
    for text in (
        "meals",
        "$200.00",
        call.initial_response["ticket-id"],
        ">Approve<",
        ">Reject<",
        ">Send update<",
        ">Custom response<",
        "Raw JSON",
        f'ws-connect="/ws/tickets/{call.pk}/?after=0&amp;shows=answer&amp;page=',  # then the page's name
    ):
        assert text in html, text


def test_confirmation_ticket_shows_what_will_run_and_hint_without_update(client, demo):
    call = ticket(kind="confirmation")
    html = login(client, demo["approver"]).get(f"/tickets/{call.pk}/").content.decode()
    assert "What will run if approved" in html and "transfer_money" in html and "Bob" in html
    assert "Please approve or reject the tool call" in html and "Payload (optional JSON)" in html
    assert ">Send update<" not in html


def test_input_ticket_offers_a_form_built_from_its_schema(client, demo):
    call = ticket(kind="input")
    c = login(client, demo["approver"])
    html = c.get(f"/tickets/{call.pk}/").content.decode()
    assert 'name="custom-s_model"' in html and 'name="custom-s_budget"' in html and ">Approve<" not in html
    response = c.post(
        act(call, "custom"), {"custom-s_model": "X1 Carbon", "custom-s_budget": "1500", "custom-final": "on"}
    )
    assert response.status_code == 302
    sent = Response.objects.get(pending_call=call)
    assert sent.payload == {"model": "X1 Carbon", "budget": 1500.0} and sent.final
    missing = c.post(act(ticket(kind="input"), "custom"), {"custom-s_budget": "3"})
    assert missing.status_code == 400 and "This field is required" in missing.content.decode()


def test_requester_sees_own_ticket_without_buttons_and_not_others(client, demo):
    mine = ticket()
    theirs = ticket(session=session_for(user_id="observer"))
    c = login(client, demo["requester"])
    html = c.get(f"/tickets/{mine.pk}/").content.decode()
    assert "You cannot answer this ticket: only approvers answer this kind of ticket." in html
    assert ">Approve<" not in html
    assert c.get(f"/tickets/{theirs.pk}/").status_code == 404
    assert c.post(act(theirs, "approve"), {}).status_code == 404


def test_non_approver_cannot_act(client, demo):
    call = ticket()
    response = login(client, demo["requester"]).post(act(call, "approve"), {}, HTTP_HX_REQUEST="true")
    assert response.status_code == 403 and not Response.objects.exists()
    call.refresh_from_db()
    assert call.status == "pending"


# -- actions ---------------------------------------------------------------------------------
def test_approve_with_htmx_closes_ticket_queues_turn_and_returns_the_panel(client, demo):
    call = ticket()
    response = login(client, demo["approver"]).post(
        act(call, "approve"), {"approve-comment": "ok by me"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="ticket-panel"
    )
    html = response.content.decode()
    assert response.status_code == 200 and html.lstrip().startswith('<div id="ticket-panel">')
    assert (
        "Approved. The agent is resuming" in html and "by <strong>approver</strong>" in html and ">Approve<" not in html
    )
    call.refresh_from_db()
    assert call.status == "approved" and call.closed_by == demo["approver"]
    sent = Response.objects.get(pending_call=call)
    assert sent.payload == {"status": "approved", "comment": "ok by me"} and sent.final and sent.action == "approve"
    assert Turn.objects.filter(session=call.session, kind="function_response").count() == 1


def test_reject_sends_the_reason_and_requires_one(client, demo):
    call = ticket()
    c = login(client, demo["approver"])
    empty = c.post(act(call, "reject"), {"reject-reason": ""})
    assert empty.status_code == 400 and not Response.objects.exists()
    response = c.post(act(call, "reject"), {"reject-reason": "over budget"})
    assert response.status_code == 302 and response["Location"] == f"/tickets/{call.pk}/"
    assert Response.objects.get(pending_call=call).payload == {"status": "rejected", "reason": "over budget"}
    page = c.get(response["Location"]).content.decode()
    assert "Rejected. The agent is resuming" in page and "Rejected by <strong>approver</strong>" in page
    assert "over budget" in page and ">Reject<" not in page


def test_send_update_keeps_the_ticket_open(client, demo):
    call = ticket()
    response = login(client, demo["approver"]).post(
        act(call, "update"),
        {"update-message": "checking receipts", "update-progress": "40", "update-extra": '{"eta": "1h"}'},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200 and ">Approve<" in response.content.decode()
    call.refresh_from_db()
    assert call.status == "in_progress" and call.is_open
    sent = Response.objects.get(pending_call=call)
    assert sent.payload == {"status": "in_progress", "message": "checking receipts", "progress": 40.0, "eta": "1h"}
    assert not sent.final


def test_custom_response_bad_json_is_a_clear_error_and_sends_nothing(client, demo):
    call = ticket()
    response = login(client, demo["approver"]).post(
        act(call, "custom"), {"custom-body": '{"status": ', "custom-final": "on"}, HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert response.status_code == 400 and "is not valid JSON" in html and "nothing was sent" in html
    assert not Response.objects.exists() and not Turn.objects.exists()


def test_custom_response_must_be_an_object_and_can_be_intermediate(client, demo):
    call = ticket()
    c = login(client, demo["approver"])
    assert c.post(act(call, "custom"), {"custom-body": "[1, 2]"}).status_code == 400
    response = c.post(act(call, "custom"), {"custom-body": '{"status": "waiting on finance"}'})
    assert response.status_code == 302
    call.refresh_from_db()
    assert call.status == "in_progress" and not Response.objects.get().final


def test_confirmation_custom_response_with_extra_keys_is_refused(client, demo):
    call = ticket(kind="confirmation")
    response = login(client, demo["approver"]).post(
        act(call, "custom"), {"custom-body": '{"confirmed": true, "note": 1}', "custom-final": "on"}
    )
    assert response.status_code == 400 and "unexpected keys: note" in response.content.decode()
    assert not Response.objects.exists()


def test_confirmation_approve_with_payload(client, demo):
    call = ticket(kind="confirmation")
    response = login(client, demo["approver"]).post(act(call, "approve"), {"approve-payload": '{"limit": 500}'})
    assert response.status_code == 302
    assert Response.objects.get().payload == {"confirmed": True, "payload": {"limit": 500}}


def test_second_approver_on_closed_ticket_is_told_and_nothing_is_sent(client, demo):
    call = ticket(status="approved", closed_by=demo["admin"])
    response = login(client, demo["approver"]).post(
        act(call, "reject"), {"reject-reason": "no"}, HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert response.status_code == 409 and "already closed" in html and "by admin" in html
    assert ">Reject<" not in html and not Response.objects.exists() and not Turn.objects.exists()


def test_actions_enforce_csrf(demo):
    call = ticket()
    client = login(Client(enforce_csrf_checks=True), demo["approver"])
    assert client.post(act(call, "approve"), {}).status_code == 403
    assert not Response.objects.exists()
    page = client.get(f"/tickets/{call.pk}/")
    token = page.cookies["csrftoken"].value
    assert client.post(act(call, "approve"), {}, HTTP_X_CSRFTOKEN=token, HTTP_HX_REQUEST="true").status_code == 200
    assert json.loads(json.dumps(Response.objects.get().payload)) == {"status": "approved"}


def test_unknown_action_and_get_are_refused(client, demo):
    call = ticket()
    c = login(client, demo["approver"])
    assert c.post(act(call, "delete"), {}).status_code == 404
    assert c.get(act(call, "approve")).status_code == 405


def test_inbox_summary_follows_the_tools_parameter_order_not_the_json_key_order():
    """PostgreSQL's jsonb reorders keys (amount before purpose); the summary reads as declared."""
    from approvals.templatetags.approvals_tags import args_summary

    call = PendingCall(kind="long_running", tool_name="ask_for_approval", args={"amount": 200.0, "purpose": "meals"})
    assert args_summary(call) == "meals · $200.00"
