"""The ticket hook's common cases ride in the append's one statement on PostgreSQL (approvals.ticket_rider):
a ticket no policy and no grant concerns opens with its event, the session's status and the notification
outbox row in one statement, atomic on its own; a tool's initial response too. Whatever the rider
cannot vouch for in the statement (a policy added since this process read them, a live grant, a ticket
already there, an abort) stores nothing there and goes to the hook, in a transaction, as before."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from google.adk.errors._stale_session_error import StaleSessionError
from google.adk.events.event import Event
from google.genai import types

from agents_app.models import AdkSession, StoredEvent, Turn
from agents_app.session_service import DjangoSessionService
from approvals import policy_cache
from approvals.models import PendingCall, Policy, Response, StandingGrant
from notifications.models import NotificationEvent

from .test_session_store_round_trips import round_trips as sent  # the statements sent meanwhile

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_connections")]
APP, USER = "reimbursement_agent", "requester"


@pytest.fixture(autouse=True)
def _only_the_approvals_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    """The app's own event hook only (tests/engine_scenarios/crashy.py may add one that wants all)."""
    from agents_app import session_hooks
    from approvals.services import tickets_record_event

    monkeypatch.setattr(session_hooks, "_event_hooks", [tickets_record_event])


@pytest.fixture(autouse=True)
def _no_inbox_open(monkeypatch: pytest.MonkeyPatch) -> None:
    """No inbox socket open anywhere, whatever an earlier test's killed server left in Redis's group
    (its member stays until the group expires): the statement counts below are those of that case."""
    from approvals import fanout

    monkeypatch.setattr(fanout, "groups_watched", lambda groups: set())


def _call(call_id: str, amount: float | str = 200.0) -> Event:
    call = types.FunctionCall(id=call_id, name="ask_for_approval", args={"purpose": "meals", "amount": amount})
    return Event(
        author=APP,
        invocation_id="inv",
        long_running_tool_ids={call_id},
        content=types.Content(parts=[types.Part(function_call=call)]),
    )


def _response(call_id: str, response: dict) -> Event:
    answer = types.FunctionResponse(id=call_id, name="ask_for_approval", response=response)
    return Event(
        author=APP,
        invocation_id="inv",
        content=types.Content(role="user", parts=[types.Part(function_response=answer)]),
    )


def _warm(service: DjangoSessionService) -> None:
    """This process has read the policies (the first ticket after start goes to the hook)."""
    session = service.create_session_sync(app_name=APP, user_id=USER)
    service._store_event(session, _call("warm-up"), None)
    assert policy_cache.cached() is not None


def test_a_ticket_opens_with_its_event_status_and_outbox_row_in_one_statement(demo):
    service = DjangoSessionService()
    _warm(service)
    session = service.create_session_sync(app_name=APP, user_id=USER)
    event = _call("c1")
    with sent() as statements:
        service._store_event(session, event, None)
    assert len(statements) == 1 and statements[0].startswith("WITH u AS (UPDATE"), statements
    ticket = PendingCall.objects.get(call_id="c1")
    assert ticket.event == StoredEvent.objects.get(event_id=event.id)
    assert (ticket.status, ticket.app_name, ticket.requester, ticket.invocation_id) == ("pending", APP, USER, "inv")
    assert (ticket.kind, ticket.tool_name, ticket.args) == (
        "long_running",
        "ask_for_approval",
        event.get_function_calls()[0].args,
    )
    assert (ticket.required_approvals, ticket.routed, ticket.policy, ticket.allow_grants) == (1, False, None, True)
    assert ticket.session.status == "waiting" and ticket.session.revision == 1
    assert list(NotificationEvent.objects.filter(ticket=ticket).values_list("name", flat=True)) == ["ticket.opened"]
    # The tool's initial response: one statement too.
    with sent() as statements:
        service._store_event(session, _response("c1", {"status": "pending"}), None)
    assert statements[0].startswith("WITH u AS (UPDATE"), statements
    assert all(sql.startswith("SELECT") for sql in statements[1:]), statements
    assert PendingCall.objects.get(call_id="c1").initial_response == {"status": "pending"}
    connection.close()


def test_a_running_session_stays_running_when_a_ticket_opens(demo):
    service = DjangoSessionService()
    _warm(service)
    session = service.create_session_sync(app_name=APP, user_id=USER)
    Turn.objects.create(session=AdkSession.objects.get(session_id=session.id), kind="message", content={})
    row = AdkSession.objects.get(session_id=session.id)
    assert row.status == "running"
    session._storage_update_marker = f"{row.pk}:{row.revision}"
    service._store_event(session, _call("c2"), None)
    assert AdkSession.objects.get(pk=row.pk).status == "running"
    connection.close()


def test_a_stale_copy_opens_no_ticket(demo):
    service = DjangoSessionService()
    _warm(service)
    session = service.create_session_sync(app_name=APP, user_id=USER)
    stale = session.model_copy(deep=True)
    stale._storage_update_marker = session._storage_update_marker
    service._store_event(session, _call("c3"), None)
    with pytest.raises(StaleSessionError):
        service._store_event(stale, _call("c4"), None)
    assert not PendingCall.objects.filter(call_id="c4").exists()
    assert not NotificationEvent.objects.filter(ticket__call_id="c4").exists()
    connection.close()


def test_a_policy_added_since_the_policies_were_read_applies_to_the_next_ticket(demo):
    """The rider matched against the cached policies (none applies) but the statement sees the policy
    tables changed: nothing stored there; the hook reads the new policy and applies it."""
    service = DjangoSessionService()
    _warm(service)
    Policy.objects.create(name="two", tool="ask_for_approval", required_approvals=2)  # the cache has not seen it
    session = service.create_session_sync(app_name=APP, user_id=USER)
    with sent() as statements:
        service._store_event(session, _call("c5"), None)
    assert statements[0].startswith("WITH u AS (UPDATE") and "BEGIN" in statements  # the statement, then the hook
    ticket = PendingCall.objects.get(call_id="c5")
    assert (ticket.policy_name, ticket.required_approvals) == ("two", 2)
    assert StoredEvent.objects.filter(session__session_id=session.id).count() == 1
    assert NotificationEvent.objects.filter(ticket=ticket).count() == 1
    connection.close()


def test_an_amount_written_as_money_or_unreadable_goes_to_the_hook_under_its_policy(demo):
    """Matched in three values as the hook does (approvals.policy_match): "$2,500" is over the demo's
    1000; "2.500,00" cannot be read, so "Large reimbursements" applies, saying why. The rider took both
    for tickets no policy concerns (one approval from anyone)."""
    service = DjangoSessionService()
    _warm(service)
    session = service.create_session_sync(app_name=APP, user_id=USER)
    for call_id, amount in (("m1", "$2,500"), ("m2", "2.500,00")):
        with sent() as statements:
            service._store_event(session, _call(call_id, amount), None)
        assert "BEGIN" in statements and not statements[0].startswith("WITH u AS (UPDATE"), statements  # the hook
    big, unread = PendingCall.objects.get(call_id="m1"), PendingCall.objects.get(call_id="m2")
    assert (big.policy_name, big.required_approvals, big.four_eyes) == ("Large reimbursements", 2, True)
    assert (unread.policy_name, unread.required_approvals) == ("Large reimbursements", 2)
    assert "amount '2.500,00' could not be read as a number" in unread.policy_rules["undecided"]
    connection.close()


def test_a_live_grant_approves_the_ticket_as_it_opens(demo):
    service = DjangoSessionService()
    _warm(service)
    session = service.create_session_sync(app_name=APP, user_id=USER)
    service._store_event(session, _call("c6"), None)
    first = PendingCall.objects.get(call_id="c6")
    grant = StandingGrant.objects.create(
        scope="session",
        app_name=APP,
        tool_name="ask_for_approval",
        kind="long_running",
        requester=USER,
        session=first.session,
        ticket=first,
        created_by=demo["approver"],
        expires_at=timezone.now() + timedelta(hours=1),
    )
    service._store_event(session, _call("c7"), None)
    ticket = PendingCall.objects.get(call_id="c7")
    assert ticket.status == "approved"
    assert Response.objects.get(pending_call=ticket).grant == grant
    connection.close()


def test_a_ticket_already_opened_for_the_call_is_not_opened_again(demo):
    service = DjangoSessionService()
    _warm(service)
    session = service.create_session_sync(app_name=APP, user_id=USER)
    service._store_event(session, _call("c8"), None)
    ticket = PendingCall.objects.get(call_id="c8")
    ticket.status = "approved"
    ticket.save()
    service._store_event(session, _call("c8"), None)  # the same call again (a replayed event)
    assert PendingCall.objects.filter(call_id="c8").count() == 1
    assert AdkSession.objects.get(session_id=session.id).status == "idle"
    assert NotificationEvent.objects.filter(ticket=ticket, name="ticket.opened").count() == 1
    connection.close()


def test_an_opened_tickets_inbox_facts_are_those_its_row_gives(demo):
    """The rider's ticket is announced with the facts it was written with (no query after commit):
    the same facts the inbox would read from the database."""
    from approvals import fanout

    service = DjangoSessionService()
    _warm(service)
    session = service.create_session_sync(app_name=APP, user_id=USER)
    with sent() as statements:
        service._store_event(session, _call("c9"), None)
    assert len(statements) == 1, statements  # no inbox open: nothing read after commit
    ticket = PendingCall.objects.get(call_id="c9")
    bare = next(iter(PendingCall.objects.raw(fanout.FACTS_ROW, [ticket.pk])))
    from_row = fanout._facts(bare)
    assert fanout._swap_quietly(bare, from_row) == from_row  # what was published before: the same
    connection.close()


TICKET_OWN = {"id", "session", "event", "created_at", "updated_at"}  # the row's own, not the rule's


def _ticket_record(ticket: PendingCall) -> dict:
    """Everything a ticket, its side rows and its session hold, but for what is each row's own."""
    from approvals.models import TicketActivity

    fields = {f.name: getattr(ticket, f.attname) for f in PendingCall._meta.concrete_fields if f.name not in TICKET_OWN}
    return {
        **fields,
        "approver_groups": list(ticket.approver_groups.values_list("name", flat=True)),
        "escalation_groups": list(ticket.escalation_groups.values_list("name", flat=True)),
        "activity": list(TicketActivity.objects.filter(ticket=ticket).values_list("kind", "message", "detail")),
        "notifications": list(
            NotificationEvent.objects.filter(ticket=ticket).order_by("id").values_list("name", "data", "turn_id")
        ),
        "responses": ticket.responses.count(),
        "session": AdkSession.objects.filter(pk=ticket.session_id).values_list("status", "revision").get(),
    }


def test_the_rider_writes_what_the_hook_writes(demo, monkeypatch):
    """The same events stored once through the rider and once through the hook (riders off): the
    tickets, their side rows and the sessions are alike in every column, so a column or side effect
    added to the hook later cannot silently differ from the statement's copy of it."""
    from agents_app import session_hooks

    service = DjangoSessionService()
    _warm(service)

    def store(call_id: str) -> tuple[dict, dict]:
        session = service.create_session_sync(app_name=APP, user_id=USER)
        service._store_event(session, _call(call_id), None)
        opened = _ticket_record(PendingCall.objects.get(call_id=call_id))
        service._store_event(session, _response(call_id, {"status": "pending", "ticket": call_id}), None)
        return opened, _ticket_record(PendingCall.objects.get(call_id=call_id))

    with sent() as statements:
        rider = store("same-call")
    assert not any(sql in ("BEGIN", "COMMIT") for sql in statements), statements  # it did ride
    PendingCall.objects.filter(call_id="same-call").update(call_id="same-call-ridden")
    monkeypatch.setattr(session_hooks, "_hook_riders", {})
    with sent() as statements:
        hook = store("same-call")
    assert "BEGIN" in statements  # it went through the hook, in a transaction
    for step, (ridden, hooked) in zip(("opened", "answered"), zip(rider, hook, strict=True), strict=True):
        assert ridden == hooked, step
    assert rider[1]["initial_response"] == {"status": "pending", "ticket": "same-call"}
    assert rider[0]["notifications"] == [("ticket.opened", {}, None)]
