"""`make run`'s demo conversations (`manage.py demo_setup --conversations`): what a newcomer logged in as
approver, approver2 or requester finds waiting and decided, made once, for the embedded demo only; and the
waiting tickets are real ones: deciding them resumes their agents."""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client

from agents_app import runner
from agents_app.models import AdkSession, StoredEvent, Turn
from approvals import services as approvals
from approvals.models import PendingCall, Response
from tests.engine_scenarios import agent_texts

pytestmark = pytest.mark.usefixtures("transactional_db")  # the drains run on threads of their own


@pytest.fixture
def seeded(monkeypatch) -> str:
    """`make run`'s demo step; what it printed. Its drains run in the command; enqueues go nowhere (no
    worker thread of another test takes them)."""
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", lambda **kw: True)
    return _seed()


def _seed(*args: str) -> str:
    out = io.StringIO()
    call_command("demo_setup", "--conversations", *args, stdout=out)
    return out.getvalue()


def _as(username: str) -> Client:
    client = Client()
    client.force_login(User.objects.get(username=username))
    return client


def _page(client: Client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, url
    return re.sub(r"\s+", " ", response.content.decode())


def _ticket(session_id: str) -> PendingCall:
    return PendingCall.objects.get(session__session_id=session_id)


def _texts(session_id: str) -> str:
    return " ".join(agent_texts(AdkSession.objects.get(session_id=session_id)))


def test_the_approver_finds_three_tickets_waiting_and_two_decided(seeded):
    assert "Demo conversations: 5 made" in seeded
    inbox = _page(_as("approver"), "/")
    assert "Nothing here" not in inbox and "3 tickets" in inbox
    for waiting in ("meals · $200.00", "laptop · $2,500.00", "Bob"):
        assert waiting in inbox
    assert "train ticket" not in inbox and "conference dinner" not in inbox  # decided: not waiting
    everything = _page(_as("approver"), "/?status=all")
    assert "5 tickets" in everything and "a train ticket · $350.00" in everything
    assert "a conference dinner · $450.00" in everything
    states = {t.session.session_id: (t.kind, t.status) for t in PendingCall.objects.select_related("session")}
    assert states == {
        "demo-meals": ("long_running", "pending"),
        "demo-laptop": ("long_running", "pending"),
        "demo-bob": ("confirmation", "pending"),
        "demo-train": ("long_running", "approved"),
        "demo-dinner": ("long_running", "rejected"),
    }


def test_the_laptop_ticket_has_one_of_its_two_finance_approvals(seeded):
    laptop = _ticket("demo-laptop")
    assert laptop.required_approvals == 2
    assert list(laptop.responses.values_list("actor__username", "action")) == [("approver", "approve")]
    assert 'id="counted-count">1 of 2<' in _page(_as("approver"), f"/tickets/{laptop.pk}/")
    assert 'id="approve-count">(2 of 2)<' in _page(_as("approver2"), f"/tickets/{laptop.pk}/")
    assert "meals · $200.00" in _page(_as("approver2"), "/")  # any approver's; the transfer is treasury's
    assert "Bob" not in _page(_as("approver2"), "/")


def test_the_requester_sees_the_conversations_and_how_each_ended(seeded):
    listing = _page(_as("requester"), "/sessions/")
    assert "No conversations" not in listing
    sessions = {s.session_id: s.status for s in AdkSession.objects.filter(user_id="requester")}
    assert sessions == {
        "demo-meals": "waiting",
        "demo-laptop": "waiting",
        "demo-bob": "waiting",
        "demo-train": "idle",
        "demo-dinner": "idle",
    }
    assert set(Turn.objects.values_list("status", flat=True)) == {"done"}
    assert "Done: I reimbursed $350.00 for a train ticket." in _texts("demo-train")
    dinner = "Sorry, your reimbursement of $450.00 for a conference dinner was rejected: Dinners are covered"
    assert dinner in _texts("demo-dinner")
    meals = AdkSession.objects.get(session_id="demo-meals")
    page = _page(_as("requester"), f"/sessions/{meals.pk}/")
    assert "Please reimburse 200$ for meals" in page and "needs a manager&#x27;s approval" in page


def test_a_second_run_makes_nothing_more(seeded):
    def counts() -> list[int]:
        return [m.objects.count() for m in (AdkSession, Turn, StoredEvent, PendingCall, Response)]

    before = counts()
    assert "none made" in _seed()
    assert counts() == before


def test_the_waiting_tickets_resume_their_agents_when_decided(seeded):
    approver, approver2 = User.objects.get(username="approver"), User.objects.get(username="approver2")
    for session_id, who in (("demo-meals", approver), ("demo-laptop", approver2)):
        approvals.ticket_approve(ticket=_ticket(session_id), actor=who)
        assert runner.session_turns_run(_ticket(session_id).session_id) == 1
        assert _ticket(session_id).status == "approved"
    assert "Done: I reimbursed $200.00 for meals." in _texts("demo-meals")
    assert "Done: I reimbursed $2,500.00 for laptop." in _texts("demo-laptop")
    approvals.ticket_approve(ticket=_ticket("demo-bob"), actor=approver)
    runner.session_turns_run(_ticket("demo-bob").session_id)
    assert "Transferred $500.00 to Bob" in _texts("demo-bob")


@pytest.mark.parametrize("args", [(), ("--allow-deployed",)])
def test_it_refuses_outside_the_embedded_demo(settings, args):
    settings.DEPLOYED = True
    with pytest.raises(CommandError, match="embedded demo only"):
        _seed(*args)
    assert not User.objects.exists() and not AdkSession.all_objects.exists()


def test_the_tests_demo_fixture_makes_no_conversations(demo):
    assert not AdkSession.all_objects.exists() and not PendingCall.objects.exists()
