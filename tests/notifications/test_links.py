"""One-tap approval links: valid (GET confirms, POST decides once, as the link's person), expired,
reused, tampered, wrong person, no longer eligible, arguments changed, ticket already closed, CSRF."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone

from approvals import services as approvals
from approvals.models import PendingCall, Response
from approvals.selectors import args_hash
from notifications import links
from notifications.models import ApprovalLink
from tests.approvals_factories import ticket


@pytest.fixture
def call(demo):
    return ticket(args={"purpose": "meals", "amount": 200.0})


def url(link: ApprovalLink, action: str = "approve") -> str:
    return f"/a/{links.link_token(link, action)}/"


def state() -> tuple:
    return (
        Response.objects.count(),
        sorted(PendingCall.objects.values_list("pk", "status")),
        sorted(ApprovalLink.objects.values_list("pk", "used_at")),
    )


def test_args_hash_is_sha256_of_canonical_json():
    import hashlib

    expected = hashlib.sha256('{"amount":200.0,"purpose":"café"}'.encode()).hexdigest()
    assert args_hash({"purpose": "café", "amount": 200.0}) == expected


def test_valid_link_logged_out_confirms_then_decides_once_as_its_person(demo, call):
    link = links.link_create(ticket=call, user=demo["approver"])
    c = Client()
    before = state()
    page = c.get(url(link))
    assert page.status_code == 200 and state() == before, "a GET never decides"
    html = page.content.decode()
    assert "Approve this request as <strong>approver</strong>?" in html and "$200.00" in html and "meals" in html
    assert html.count('type="submit"') == 1  # one big button (logged out: no logout form either)
    r = c.post(url(link))
    assert r.status_code == 200 and "Approved. The agent is resuming." in r.content.decode()
    call.refresh_from_db()
    assert call.status == "approved" and call.closed_by == demo["approver"]
    response = Response.objects.get(pending_call=call)
    assert response.actor == demo["approver"] and response.action == "approve"
    link.refresh_from_db()
    assert link.used_at and link.used_action == "approve" and link.response == response


def test_reject_link_asks_for_a_reason_that_the_agent_receives(demo, call):
    link = links.link_create(ticket=call, user=demo["approver"])
    c = Client()
    before = state()
    r = c.post(url(link, "reject"), {"reason": ""})
    assert r.status_code == 400 and "This field is required" in r.content.decode() and state() == before
    r = c.post(url(link, "reject"), {"reason": "no receipt"})
    assert r.status_code == 200 and "Rejected." in r.content.decode()
    response = Response.objects.get(pending_call=call)
    assert response.payload == {"status": "rejected", "reason": "no receipt"} and response.actor == demo["approver"]


def test_the_link_owner_logged_in_uses_it_too(demo, call):
    link = links.link_create(ticket=call, user=demo["approver"])
    c = Client()
    c.force_login(demo["approver"])
    assert c.get(url(link)).status_code == 200
    assert c.post(url(link)).status_code == 200
    assert PendingCall.objects.get(pk=call.pk).status == "approved"


def test_reused_link_shows_a_clear_page_and_changes_nothing(demo, call):
    link = links.link_create(ticket=call, user=demo["approver"])
    c = Client()
    assert c.post(url(link)).status_code == 200
    before = state()
    for action in ("approve", "reject"):  # both halves of the pair are spent
        for method in (c.get, c.post):
            r = method(url(link, action))
            assert r.status_code == 410 and "This link was already used." in r.content.decode()
    assert state() == before


def test_expired_link_shows_a_clear_page_and_changes_nothing(demo, call):
    link = links.link_create(ticket=call, user=demo["approver"])
    ApprovalLink.objects.filter(pk=link.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    before = state()
    for method in (Client().get, Client().post):
        r = method(url(link))
        assert r.status_code == 410 and "This link has expired." in r.content.decode()
    assert state() == before


def test_expiry_defaults_to_24_hours_and_follows_the_setting(demo, call, settings):
    link = links.link_create(ticket=call, user=demo["approver"])
    assert abs((link.expires_at - link.created_at) - timedelta(hours=24)) < timedelta(seconds=5)
    settings.ADKWEB_APPROVAL_LINK_SECONDS = 60
    short = links.link_create(ticket=call, user=demo["approver"])
    assert abs((short.expires_at - short.created_at) - timedelta(seconds=60)) < timedelta(seconds=5)


@pytest.mark.parametrize(
    "mangle",
    [
        lambda t: t[:-1] + ("A" if t[-1] != "A" else "B"),  # signature changed
        lambda t: t[:-10],  # cut short
        lambda t: "x" + t,  # payload changed
        lambda t: "garbage",
    ],
    ids=["signature", "truncated", "payload", "garbage"],
)
def test_tampered_link_shows_a_clear_page_and_changes_nothing(demo, call, mangle):
    link = links.link_create(ticket=call, user=demo["approver"])
    before = state()
    for method in (Client().get, Client().post):
        r = method(f"/a/{mangle(links.link_token(link, 'approve'))}/")
        assert r.status_code == 400 and "This link is not valid." in r.content.decode()
        assert "meals" not in r.content.decode()
    assert state() == before


def test_a_token_signed_for_another_person_or_ticket_is_tampered(demo, call):
    """The signed payload binds ticket, person and hash: a valid signature over other values fails."""
    from django.core import signing

    link = links.link_create(ticket=call, user=demo["approver"])
    forged = {"k": link.key, "t": link.ticket_id, "u": demo["admin"].pk, "h": link.args_hash, "a": "approve"}
    token = signing.dumps(forged, salt="some-other-salt", compress=True)
    assert Client().get(f"/a/{token}/").status_code == 400
    token = signing.dumps(forged, salt=links.SALT, compress=True)  # right salt, wrong person
    assert Client().get(f"/a/{token}/").status_code == 400
    assert state()[0] == 0


def test_wrong_person_logged_in_is_refused_and_changes_nothing(demo, call):
    link = links.link_create(ticket=call, user=demo["approver"])
    before = state()
    for who in ("admin", "requester", "observer"):
        c = Client()
        c.force_login(demo[who])
        for method in (c.get, c.post):
            r = method(url(link))
            html = r.content.decode()
            assert r.status_code == 403 and "This link is not yours." in html
            assert f"you are logged in as <strong>{who}</strong>" in html and "meals" not in html
    assert state() == before


def test_no_longer_eligible_asks_to_log_in(demo, call):
    link = links.link_create(ticket=call, user=demo["approver"])
    demo["approver"].groups.remove(Group.objects.get(name="approvers"))
    before = state()
    for method in (Client().get, Client().post):
        r = method(url(link))
        html = r.content.decode()
        assert r.status_code == 403 and "Log in to decide this ticket." in html
        assert f"/accounts/login/?next=/tickets/{call.pk}/" in html
    User.objects.filter(pk=demo["approver"].pk).update(is_active=False)
    demo["approver"].groups.add(Group.objects.get(name="approvers"))
    assert Client().post(url(link)).status_code == 403, "an inactive person's link decides nothing"
    assert state() == before


def test_changed_arguments_refuse_the_link(demo, call):
    link = links.link_create(ticket=call, user=demo["approver"])
    PendingCall.objects.filter(pk=call.pk).update(args={"purpose": "meals", "amount": 2000.0})
    before = state()
    r = Client().post(url(link))
    assert r.status_code == 409 and "changed since this link was sent" in r.content.decode()
    assert state() == before


def test_a_ticket_closed_meanwhile_gets_409_naming_who_decided(demo, call):
    link = links.link_create(ticket=call, user=demo["approver"])
    approvals.ticket_reject(ticket=call, actor=demo["admin"], reason="duplicate")
    before = state()
    r = Client().post(url(link))
    html = r.content.decode()
    assert r.status_code == 409 and f"Ticket #{call.pk} is already rejected by admin." in html
    assert state() == before


def test_one_tap_post_needs_a_csrf_token(demo, call):
    link = links.link_create(ticket=call, user=demo["approver"])
    c = Client(enforce_csrf_checks=True)
    page = c.get(url(link))
    before = state()
    assert c.post(url(link)).status_code == 403 and state() == before
    token = page.context["csrf_token"]
    assert c.post(url(link), {"csrfmiddlewaretoken": str(token)}).status_code == 200
    assert PendingCall.objects.get(pk=call.pk).status == "approved"


def test_copy_approval_link_on_the_ticket_page(demo, call, client):
    client.force_login(demo["approver"])
    page = client.get(f"/tickets/{call.pk}/").content.decode()
    assert "Copy approval link" in page
    r = client.post(f"/notifications/tickets/{call.pk}/link/", HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert r.status_code == 200 and "decide as <strong>you</strong>" in html and "<html" not in html
    link = ApprovalLink.objects.get()
    assert link.user == demo["approver"] and link.ticket == call
    assert f"/a/{links.link_token(link, 'approve')[:20]}" in html
    # The requester sees the ticket but may not decide it: no button, and the URL refuses.
    client.force_login(demo["requester"])
    assert "Copy approval link" not in client.get(f"/tickets/{call.pk}/").content.decode()
    assert client.post(f"/notifications/tickets/{call.pk}/link/").status_code == 403
    approvals.ticket_approve(ticket=call, actor=demo["approver"])
    client.force_login(demo["approver"])
    assert client.post(f"/notifications/tickets/{call.pk}/link/").status_code == 409
