"""A decision on a tool confirmation and an admin's save that takes the tool out of its agent, racing on
PostgreSQL's real row locks. Before: neither waited for the other. A decision checked that the agent
still had the tool, the admin's save committed in between, and the decision committed after it: an
approval recorded (201) for a tool that was gone, its turn then failing ('Tool ... is not registered'),
the approved transfer never made; or the admin was told the confirmation waited while it was being
approved. Now the decision holds the agent's configuration row (FOR SHARE) and the admin's save locks it
first (FOR UPDATE): one of the two orders happens. Each side is held open, its lock taken, until the
other has blocked on it (or had a second to)."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest
from django.test import Client

from agents_app.models import AgentConfig, Turn
from agents_app.session_status import session_status_sync
from approvals import services
from approvals.decision_plan import ToolGone
from approvals.models import PendingCall, Response
from tests.agents_app.test_config_history import _form
from tests.approvals_factories import ticket
from tests.integration.races import at_once, held_then

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _no_worker_woken(monkeypatch: pytest.MonkeyPatch) -> None:
    """An approval's turn stays queued, as it is until a worker takes it: no wake-up is sent. In `make test`'s
    run a real worker (the session's `celery_worker_process`, started by an earlier file) would take it and
    fail it (these conversations have no agent run behind them), and the admin's save, which waits only
    while an answer is on its way, would then go through."""
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", lambda *, session_pk: True)
    monkeypatch.setattr("agents_app.enqueue.session_enqueue_before_commit", lambda *, session_pk: None)


def _admin_save(admin: Any, tools: list[str]) -> Any:
    """The admin's change form posted, as a browser does: the page it answers."""
    return _admin_post(_admin_client(admin), tools)


def _admin_client(admin: Any) -> Client:
    client = Client()
    client.force_login(admin)
    return client


def _admin_post(client: Client, tools: list[str]) -> Any:
    config = AgentConfig.objects.get(name="transfer_agent")
    return client.post(f"/admin/agents_app/agentconfig/{config.pk}/change/", _form(config, tools=tools), follow=True)


def _refused(page: Any) -> str:
    """What the admin's change form said against its tools ("": saved, the page redirected to the list)."""
    assert page.status_code == 200, page.status_code
    if page.redirect_chain:
        return ""
    return str(page.context["adminform"].form.errors["tools"])


def _turns_run() -> None:
    """Every queued turn marked done, as a worker's runs end (its conversation's stored status follows)."""
    for turn in Turn.objects.filter(status="queued"):
        Turn.objects.filter(pk=turn.pk).update(status="done")
        session_status_sync(turn.session_id)


def _approve(call: PendingCall, approver: Any) -> Any:
    return services.ticket_approve(ticket=PendingCall.objects.get(pk=call.pk), actor=approver)


def _tools() -> list[str]:
    return AgentConfig.objects.get(name="transfer_agent").tools


def test_the_save_first_then_the_approval_is_refused(demo):
    call = ticket(kind="confirmation")
    done = held_then(lambda: _admin_save(demo["admin"], []), lambda: _approve(call, demo["approver"]))
    page = done["first"]
    assert not isinstance(page, Exception) and page.status_code == 200, done
    assert isinstance(done["second"], ToolGone), done
    assert done["waited"], "the decision did not wait for the admin's save"
    assert "no longer has the tool 'transfer_money'" in str(done["second"])
    call.refresh_from_db()
    assert call.status == "pending" and not Response.objects.filter(pending_call=call).exists()
    assert not Turn.objects.filter(session=call.session).exists() and _tools() == []


def test_the_approval_first_then_the_save_is_refused_while_the_answer_is_on_its_way(demo):
    """The agent is built when its turn runs: a save that took the tool out before the approval's turn
    ran would fail that turn (the approved transfer never made). The admin is told to save again once it
    has run; the tool stays."""
    call = ticket(kind="confirmation")
    done = held_then(lambda: _approve(call, demo["approver"]), lambda: _admin_save(demo["admin"], []))
    assert isinstance(done["first"], Response), done
    assert done["waited"], "the admin's save did not wait for the decision"
    said = _refused(done["second"])
    assert f"ticket #{call.pk}" in said and "transfer_money" in said, said
    call.refresh_from_db()
    assert call.status == "approved" and _tools() == ["transfer_money"]
    (turn,) = Turn.objects.filter(session=call.session)
    assert turn.status == "queued"
    _turns_run()
    assert _refused(_admin_save(demo["admin"], [])) == "" and _tools() == []


def _approve_after(call: PendingCall, approver: Any, delay: float) -> Any:
    time.sleep(delay)  # spread out, so the save lands before some approvals, or after
    return _approve(call, approver)


def test_decisions_and_saves_raced_many_times_never_deadlock_and_never_approve_a_gone_tool(demo):
    """Three approvals (three conversations: the session and ticket locks they take first) and an admin's
    save that takes the tool out, released together, 15 times: no deadlock or other error; the save went
    through exactly when no approval did (each approval after it: 409); refused, it named the approvals."""
    approver, admin = demo["approver"], demo["admin"]
    spread = random.Random(9)
    for round_ in range(15):
        calls = [ticket(kind="confirmation") for _ in range(3)]
        delays = [[0, 0.4, spread.uniform(0, 0.2)][round_ % 3] for _ in calls]
        client = _admin_client(admin)
        steps: dict[Any, Any] = {
            c.pk: lambda c=c, d=d: _approve_after(c, approver, d) for c, d in zip(calls, delays, strict=True)
        }
        done = at_once({**steps, "save": lambda client=client: _admin_post(client, [])})
        approved = [c.pk for c in calls if isinstance(done[c.pk], Response)]
        refused = [c.pk for c in calls if isinstance(done[c.pk], ToolGone)]
        assert sorted(approved + refused) == sorted(c.pk for c in calls), (round_, done)
        errors = _refused(done["save"])
        if approved:
            assert _tools() == ["transfer_money"] and errors, (round_, done)
        else:
            assert _tools() == [] and not errors, (round_, done, errors)
        assert PendingCall.objects.filter(pk__in=approved, status="approved").count() == len(approved)
        assert PendingCall.objects.filter(pk__in=refused, status="pending").count() == len(refused)
        _turns_run()
        config = AgentConfig.objects.get(name="transfer_agent")
        config.tools = ["transfer_money"]
        config.save()
