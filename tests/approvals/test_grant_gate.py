"""A new ticket asks `grants.grant_matching` only when a live standing grant for its agent, tool and
kind exists in its conversation or for its requester (one SQL question, on SQLite as on PostgreSQL):
most tickets have none, and the matching (its refusals, a query with the givers) was run for each."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from approvals import grants, policy_cache, rules
from approvals.models import StandingGrant
from tests.approvals_factories import session_for, ticket

pytestmark = pytest.mark.django_db


def _grant(call, **fields) -> StandingGrant:
    values = dict(
        scope="session",
        app_name=call.app_name,
        tool_name=call.tool_name,
        kind=call.kind,
        requester=call.requester,
        session=call.session,
        ticket=call,
        expires_at=timezone.now() + timedelta(minutes=5),
    )
    values.update(fields)
    return StandingGrant.objects.create(**values)


def test_grant_possible_only_with_a_live_grant_that_fits(demo):
    session = session_for()
    first = ticket(session=session)
    assert policy_cache.policies_and_grant(ticket(session=session))[1] is False
    live = _grant(first, created_by=demo["approver"])
    assert policy_cache.policies_and_grant(ticket(session=session))[1] is True
    # Another conversation of the same requester: only a grant for the requester fits.
    assert policy_cache.policies_and_grant(ticket(session=session_for()))[1] is False
    _grant(first, scope="user", session=None, created_by=demo["approver"])
    assert policy_cache.policies_and_grant(ticket(session=session_for()))[1] is True
    StandingGrant.objects.update(expires_at=timezone.now() - timedelta(seconds=1))  # expired
    assert policy_cache.policies_and_grant(ticket(session=session))[1] is False
    StandingGrant.objects.update(expires_at=timezone.now() + timedelta(minutes=5), revoked_at=timezone.now())
    assert policy_cache.policies_and_grant(ticket(session=session))[1] is False
    StandingGrant.objects.update(revoked_at=None, tool_name="other_tool")
    assert policy_cache.policies_and_grant(ticket(session=session))[1] is False
    assert live.pk


def test_a_ticket_without_a_fitting_grant_does_not_run_the_matching(demo, monkeypatch):
    asked: list[int] = []
    matching = grants.grant_matching

    def spy(call):
        asked.append(call.pk)
        return matching(call)

    monkeypatch.setattr(grants, "grant_matching", spy)
    session = session_for()
    first = ticket(session=session)
    rules.ticket_open_rules(first)
    assert asked == []
    _grant(first, created_by=demo["approver"])
    rules.ticket_open_rules(ticket(session=session))
    assert len(asked) == 1
