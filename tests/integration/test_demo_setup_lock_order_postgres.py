"""`demo_setup` run while a tool confirmation is decided, on PostgreSQL's real row locks. A decision takes the
people's rows, the session's, the ticket's, then its agent's row (FOR SHARE). Before: demo_setup updated the
agents' rows (FOR UPDATE) and then set the policies' groups, which locks their members' rows (approvals.
assignees): a decision by a member of a policy's group, holding their row and the ticket while it waited for
the agent's row, and demo_setup, holding that row while it waited for the member's, deadlocked (PostgreSQL
aborted one of them: "deadlock detected"). Now demo_setup takes the people and policies in one transaction
and the agents' rows in the next, which waits for no other row."""

from __future__ import annotations

import threading
import time

import pytest
from django.contrib.auth.models import Group, User

from agents_app.demo import setup
from approvals import services
from approvals.models import PendingCall, Policy, Response
from tests.approvals_factories import ticket
from tests.integration.races import at_once, waiting_on_a_lock

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _no_worker_woken(monkeypatch: pytest.MonkeyPatch) -> None:
    """The approval's turn stays queued: no worker of the run's takes it (no agent run behind it)."""
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", lambda *, session_pk: True)
    monkeypatch.setattr("agents_app.enqueue.session_enqueue_before_commit", lambda *, session_pk: None)


def test_demo_setup_and_a_confirmations_decision_do_not_deadlock(demo, monkeypatch):
    tara = User.objects.create_user("tara", password="tara-pw")  # an approver in treasury, not a demo user
    tara.groups.add(Group.objects.get(name="approvers"), Group.objects.get(name="treasury"))
    Policy.objects.get(name="Treasury transfers").approver_groups.clear()  # an admin's change demo_setup undoes
    call = ticket(kind="confirmation")
    held, go = threading.Event(), threading.Event()
    record = setup.agent_config_record

    def recorded(*, config, actor=None):  # noqa: ANN001, ANN202 - agent_config_record's
        if config.name == "transfer_agent":  # its row is held (FOR UPDATE) here: let the decision reach it
            held.set()
            go.wait(10)
        return record(config=config, actor=actor)

    monkeypatch.setattr(setup, "agent_config_record", recorded)

    def decide() -> Response:
        assert held.wait(10)
        return services.ticket_approve(ticket=PendingCall.objects.get(pk=call.pk), actor=tara)

    def release() -> bool:
        assert held.wait(10)
        deadline, waited = time.monotonic() + 5, False
        while time.monotonic() < deadline and not waited:
            waited = waiting_on_a_lock()  # the decision, on transfer_agent's row
            time.sleep(0.01)
        go.set()
        return waited

    done = at_once({"setup": setup.demo_setup, "decision": decide, "release": release})

    errors = {k: v for k, v in done.items() if isinstance(v, BaseException)}
    assert not errors, errors
    assert done["release"], "the decision did not wait for the agent's row"
    call.refresh_from_db()
    assert call.status == PendingCall.Status.APPROVED and done["decision"].actor_username == "tara"
    assert list(Policy.objects.get(name="Treasury transfers").approver_groups.values_list("name", flat=True)) == [
        "treasury"
    ]
