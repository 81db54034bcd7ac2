"""A failed turn queued before app-wide state was guarded (ad99096) may carry `app:` keys in its stored
`stateDelta`, sent by someone who may not set them. Retrying it would apply them now: it is refused
(409, the keys named) unless its sender may configure agents, and nothing is queued."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from agents_app import services
from agents_app.models import AdkSession, Turn


def _old_failed_turn(sender: Any, delta: dict) -> tuple[AdkSession, Turn]:
    session = services.session_create(app_name="reimbursement_agent", user_id="requester")
    turn = Turn.objects.create(
        session=session,
        kind=Turn.Kind.MESSAGE,
        content={"role": "user", "parts": [{"text": "hello"}]},
        state_delta=delta,
        status=Turn.Status.FAILED,
        error="agents_app.agents.AgentNotFound: No enabled agent named 'reimbursement_agent'.",
        created_by=sender,
    )
    return session, turn


def _retry(user: Any, session: AdkSession, turn: Turn) -> Any:
    client = Client()
    client.force_login(user)
    return client.post(f"/sessions/{session.pk}/turns/{turn.pk}/retry/")


@pytest.mark.django_db
@pytest.mark.parametrize("retrier", ["requester", "approver", "admin"])
def test_a_turn_whose_sender_may_not_set_app_state_is_not_retried(demo, retrier):
    session, turn = _old_failed_turn(demo["requester"], {"app:policy_limit": 999999, "k": 1})
    r = _retry(demo[retrier], session, turn)
    assert r.status_code == 409, r.content
    body = r.content.decode()
    assert "app:policy_limit" in body and "send a new message" in body
    turn.refresh_from_db()
    assert turn.status == Turn.Status.FAILED and turn.state_delta == {"app:policy_limit": 999999, "k": 1}


@pytest.mark.django_db
def test_an_agent_admins_turn_with_app_state_and_plain_state_turns_are_retried(demo):
    session, turn = _old_failed_turn(demo["admin"], {"app:policy_limit": 500})
    assert _retry(demo["admin"], session, turn).status_code == 302
    assert Turn.objects.get(pk=turn.pk).status == Turn.Status.QUEUED
    session, turn = _old_failed_turn(demo["requester"], {"user:tz": "UTC", "k": 1})
    assert _retry(demo["requester"], session, turn).status_code == 302
    assert Turn.objects.get(pk=turn.pk).status == Turn.Status.QUEUED


@pytest.mark.django_db
def test_a_sender_since_deleted_counts_as_one_without_the_right(demo):
    session, turn = _old_failed_turn(None, {"app:policy_limit": 1})
    assert _retry(demo["admin"], session, turn).status_code == 409
    assert Turn.objects.get(pk=turn.pk).status == Turn.Status.FAILED


def test_the_prefix_is_adks():
    from google.adk.sessions.state import State

    from agents_app.app_state import APP_PREFIX

    assert APP_PREFIX == State.APP_PREFIX
