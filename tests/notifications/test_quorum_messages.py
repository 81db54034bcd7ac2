"""Bulk and one-tap approvals of a ticket that needs two approvers (M of N) say what happened: the
first is "1 of 2 approvals recorded" (not approved, the agent still waits); only the approval that
closes the ticket says "Approved"."""

from __future__ import annotations

from django.test import Client

from agents_app.models import Turn
from approvals.models import PendingCall, Response
from notifications import links
from tests.approvals.policy_helpers import open_ticket

BIG = {"purpose": "conference", "amount": 2500.0}  # the demo's "Large reimbursements": finance, 2 of N


def _bulk(user, ids: list[int]) -> str:
    c = Client()
    c.force_login(user)
    r = c.post("/inbox/bulk/", {"action": "approve", "ticket": ids, "confirm": "1"})
    assert r.status_code == 200
    return r.content.decode()


def test_bulk_says_1_of_2_recorded_then_approved_when_the_second_approver_closes_it(demo):
    big, small = open_ticket(args=BIG), open_ticket(args={"purpose": "taxi", "amount": 30.0})
    assert big.required_approvals == 2
    html = _bulk(demo["approver"], [big.pk, small.pk])
    first = html[html.index(f'id="bulk-result-{big.pk}"') :].split("</li>")[0]
    assert "1 of 2 approvals recorded" in first and "Approved" not in first
    assert "1 of 2 approved" in html and 'id="bulk-held"' in html and "not approved yet" in html
    big.refresh_from_db()
    assert big.is_open and not Turn.objects.filter(session=big.session).exists(), "the agent still waits"
    html = _bulk(demo["approver2"], [big.pk])
    assert "1 of 1 approved" in html and "Approved; the agent is resuming." in html
    assert "approvals recorded" not in html and 'id="bulk-held"' not in html
    big.refresh_from_db()
    assert big.status == "approved" and big.closed_by == demo["approver2"]
    assert Turn.objects.filter(session=big.session).count() == 1


def test_one_tap_says_1_of_2_recorded_then_approved_when_the_second_approver_closes_it(demo):
    big = open_ticket(args=BIG)
    first = links.link_create(ticket=big, user=demo["approver"])
    r = Client().post(f"/a/{links.link_token(first, 'approve')}/")
    html = r.content.decode()
    assert r.status_code == 200 and "1 of 2 approvals recorded." in html
    assert "Approved." not in html and "not approved yet" in html and "Recorded as an approval by" in html
    assert PendingCall.objects.get(pk=big.pk).is_open
    second = links.link_create(ticket=PendingCall.objects.get(pk=big.pk), user=demo["approver2"])
    html = Client().post(f"/a/{links.link_token(second, 'approve')}/").content.decode()
    assert "Approved. The agent is resuming." in html and "approvals recorded" not in html
    big.refresh_from_db()
    assert big.status == "approved" and big.closed_by == demo["approver2"]
    assert list(Response.objects.filter(pending_call=big).values_list("actor__username", "final")) == [
        ("approver", False),
        ("approver2", True),
    ]


def _text(html: str) -> str:
    import re

    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_a_link_whose_approval_already_counts_says_it_is_recorded_and_how_many_more(demo):
    """The approver approved a 2-of-N ticket on its page, then opens the email's one-tap link: not an
    "Approve?" button that ends in a refusal, but their approval recorded, 1 of 2, one more needed."""
    from approvals import services as approvals

    big = open_ticket(args=BIG)
    link = links.link_create(ticket=big, user=demo["approver"])
    approvals.ticket_approve(ticket=big, actor=demo["approver"], args_hash=big.args_hash)
    before = Response.objects.count()
    for method in (Client().get, Client().post):
        r = method(f"/a/{links.link_token(link, 'approve')}/")
        text = _text(r.content.decode())
        assert r.status_code == 409, text
        assert f"Your approval of ticket #{big.pk} is recorded" in text
        assert "1 of the 2 approvals it needs" in text and "1 more" in text
        assert "Approve this request" not in text and "closed" not in text and "already used" not in text
    assert Response.objects.count() == before and PendingCall.objects.get(pk=big.pk).is_open
    r = Client().get(f"/a/{links.link_token(link, 'reject')}/")
    assert r.status_code == 200 and "Reject this request" in r.content.decode(), "they may still reject it"


def test_a_used_link_whose_approval_waits_says_recorded_not_approved(demo):
    big = open_ticket(args=BIG)
    link = links.link_create(ticket=big, user=demo["approver"])
    assert Client().post(f"/a/{links.link_token(link, 'approve')}/").status_code == 200
    r = Client().get(f"/a/{links.link_token(link, 'approve')}/")
    text = _text(r.content.decode())
    assert r.status_code == 410 and "This link was already used." in text
    assert f"It recorded your approval of ticket #{big.pk}" in text and "approved ticket" not in text
    assert "1 of the 2 approvals it needs" in text and "1 more" in text


def test_the_ticket_page_offers_no_link_to_an_approver_whose_approval_counts(demo):
    """Approved on the page, 1 of 2: "Copy approval link" would make a link whose approve half can only
    refuse (409, recorded). The page says what is true instead; another approver still gets the link."""
    from approvals import services as approvals
    from notifications.models import ApprovalLink

    big = open_ticket(args=BIG)
    approvals.ticket_approve(ticket=big, actor=demo["approver"], args_hash=big.args_hash)
    c = Client()
    c.force_login(demo["approver"])
    text = _text(c.get(f"/tickets/{big.pk}/").content.decode())
    assert "Copy approval link" not in text
    assert "Your approval counts ( 1 of 2 ); another approver gives the next one. You may still reject it." in text
    r = c.post(f"/notifications/tickets/{big.pk}/link/", HTTP_HX_REQUEST="true")  # a page loaded before
    text = _text(r.content.decode())
    assert r.status_code == 409 and f"Your approval of ticket #{big.pk} is recorded: 1 of 2" in text, text
    assert not ApprovalLink.objects.exists()
    c.force_login(demo["approver2"])
    assert "Copy approval link" in c.get(f"/tickets/{big.pk}/").content.decode()
    assert c.post(f"/notifications/tickets/{big.pk}/link/").status_code == 200
    assert ApprovalLink.objects.get().user == demo["approver2"]
