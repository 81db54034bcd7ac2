"""One escalation rule (approvals.permissions.escalation_reached): a ticket is open to its escalation groups
from its escalation time on, that instant included, and a ticket decided exactly then reached them too. The
ticket's page (Python, timezone.now), the list (SQL, escalated_q) and an inbox socket's facts (approvals.
fanout, time.time) each restated it; here they are asked at the same instants: just before, exactly at and
just after the escalation time, and for a ticket closed just before and exactly at it."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db.models import DateTimeField, Value
from django.db.models.functions import Now
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from adkweb import compiled
from approvals import fanout, services
from approvals.models import PendingCall
from approvals.permissions import escalated_q
from tests.approvals.policy_helpers import open_ticket, person, policy, team

TICK = timedelta(microseconds=1)


@pytest.fixture
def olga(demo):
    """Of ops only, where a policy routing to fin-team escalates after 30 minutes."""
    ops = team("ops")
    policy("slow", tool="ask_for_approval", groups=(team("fin-team"),), escalation=(ops,), escalate_after_seconds=1800)
    return person("olga", ops)


def _escalating_at(at, closed_at=None) -> PendingCall:
    """A ticket escalating at `at`; approved (by fin-team) at `closed_at` if given."""
    ticket = open_ticket(args={"purpose": "meals", "amount": 200.0})
    if closed_at is not None:
        fiona = User.objects.filter(username="fiona").first() or person("fiona", team("fin-team"))
        services.ticket_approve(ticket=ticket, actor=fiona, args_hash=ticket.args_hash)
        PendingCall.objects.filter(pk=ticket.pk).update(closed_at=closed_at)
    PendingCall.objects.filter(pk=ticket.pk).update(escalate_at=at)
    ticket.refresh_from_db()
    return ticket


def _readers_at(monkeypatch, olga, ticket: PendingCall, now) -> dict[str, bool]:
    """Whether olga's page, the list's SQL and her inbox socket take the ticket for escalated at `now`."""
    client = Client()
    client.force_login(olga)
    facts = fanout._facts(ticket)
    with monkeypatch.context() as m:
        m.setattr(timezone, "now", lambda: now)
        page = client.get(reverse("approvals:ticket", args=[ticket.pk])).status_code == 200
        m.setattr(time, "time", lambda: now.timestamp())
        socket = fanout.Viewer.of(olga).sees(facts)
    at = Value(now, output_field=DateTimeField())
    listed = PendingCall.objects.filter(pk=ticket.pk).filter(escalated_q(now=at)).exists()
    return {"page": page, "list": listed, "socket": socket}


ALL = {"page": True, "list": True, "socket": True}
NONE = {"page": False, "list": False, "socket": False}


def test_exactly_at_its_escalation_time_every_reader_takes_it_for_escalated(monkeypatch, olga):
    at = timezone.now().replace(microsecond=500000) - timedelta(minutes=1)
    ticket = _escalating_at(at)
    assert _readers_at(monkeypatch, olga, ticket, at - TICK) == NONE
    assert _readers_at(monkeypatch, olga, ticket, at) == ALL
    assert _readers_at(monkeypatch, olga, ticket, at + TICK) == ALL


def test_a_ticket_closed_exactly_at_its_escalation_time_reached_them_and_one_closed_before_never(monkeypatch, olga):
    at = timezone.now().replace(microsecond=500000) - timedelta(minutes=1)
    at_once = _escalating_at(at, closed_at=at)
    before = _escalating_at(at, closed_at=at - TICK)
    later = at + timedelta(seconds=30)
    assert _readers_at(monkeypatch, olga, at_once, later) == ALL
    assert _readers_at(monkeypatch, olga, before, later) == NONE


def _database_clock(monkeypatch, at) -> None:
    """The database's clock (Django's Now(), which the list's query asks: escalated_q) reads `at` from here on:
    the list is asked at a known instant, not at whenever a loaded machine gets to run its query. Queries
    compiled meanwhile are kept apart (adkweb.compiled) and dropped after the test: none keeps the instant."""
    monkeypatch.setattr(compiled, "_compiled", {})

    def frozen(self, compiler, connection, **extra_context):
        return compiler.compile(Value(at, output_field=DateTimeField()))

    for vendor_sql in ("as_sql", "as_sqlite", "as_postgresql"):
        monkeypatch.setattr(Now, vendor_sql, frozen)


def test_the_list_with_the_databases_clock_agrees_just_before_exactly_at_and_just_after(monkeypatch, olga):
    client = Client()
    client.force_login(olga)
    at = timezone.now().replace(microsecond=500000) - timedelta(minutes=1)
    soon, exactly, past = (_escalating_at(at + d) for d in (TICK, timedelta(0), -TICK))
    _database_clock(monkeypatch, at)
    listed = {t["id"] for t in client.get("/api/pending-calls?status=all").json()["results"]}
    monkeypatch.setattr(time, "time", lambda: at.timestamp())  # the socket's facts (fanout), at the same instant
    assert exactly.pk in listed and past.pk in listed and soon.pk not in listed
    viewer = fanout.Viewer.of(olga)
    assert viewer.sees(fanout._facts(exactly)) and viewer.sees(fanout._facts(past))
    assert not viewer.sees(fanout._facts(soon))
