"""A saved decision is answered truthfully: 2xx even when the live-update layer or the broker fails
after the commit (issue 8: every decision answered 500 while Redis was down, yet each was saved)."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from agents_app.models import Turn
from approvals.models import PendingCall, Response
from tests.approvals_factories import ticket


class BrokenLayer:
    """A channel layer whose Redis has gone away."""

    def __init__(self, **kwargs) -> None:
        pass

    async def group_send(self, group: str, message: dict) -> None:
        raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    async def send(self, channel: str, message: dict) -> None:
        raise ConnectionError("Connection refused.")


@pytest.fixture
def layer_down(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "tests.approvals.test_decisions_acknowledged.BrokenLayer"}}


@pytest.fixture
def outage(transactional_db, layer_down, broker_down):
    """Both Redis uses down; data committed so after-commit hooks run as in production."""


@pytest.fixture
def broker_down(monkeypatch):
    from adkweb.celery import app

    def refuse(*args, **kwargs):
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(app, "send_task", refuse)


def _approver(demo) -> Client:
    c = Client()
    c.force_login(demo["approver"])
    return c


@pytest.mark.parametrize("path", ["approve", "reject", "responses"])
def test_api_decision_is_201_when_the_channel_layer_and_broker_are_down(demo, outage, path):
    call = ticket()
    body = {"response": {"status": "approved"}} if path == "responses" else {}
    r = _approver(demo).post(f"/api/pending-calls/{call.pk}/{path}", json.dumps(body), content_type="application/json")
    assert r.status_code == 201, r.content
    call.refresh_from_db()
    assert call.is_closed and Response.objects.filter(pending_call=call).count() == 1
    # The turn that carries it is owed (queued): the sweeper delivers it when the broker is back.
    assert list(Turn.objects.filter(session=call.session).values_list("status", flat=True)) == ["queued"]


def test_page_decision_succeeds_when_the_channel_layer_and_broker_are_down(demo, outage):
    call = ticket()
    r = _approver(demo).post(f"/tickets/{call.pk}/approve/", {"approve-comment": "ok"})
    assert r.status_code == 302, r.content
    assert PendingCall.objects.get(pk=call.pk).status == "approved"


def test_message_is_accepted_when_the_channel_layer_and_broker_are_down(demo, outage):
    call = ticket()
    c = Client()
    c.force_login(demo["requester"])
    r = c.post(f"/sessions/{call.session.pk}/messages/", {"text": "hello?"})
    assert r.status_code in (200, 302), r.content
    assert Turn.objects.filter(session=call.session, status="queued").count() == 1


def test_a_run_is_not_failed_by_a_channel_layer_outage(demo, outage):
    """Issue 8: a run in flight when Redis went away failed for good after its tool had run."""
    from agents_app import runner, services
    from tests.engine_scenarios import agent_texts

    session = services.session_create(app_name="stock_agent", user_id="requester")
    services.message_send(session=session, text="What is the price of GOOG?", actor=demo["requester"])
    assert runner.session_turns_run(session.pk) == 1  # publishing every event and chunk fails meanwhile
    assert list(Turn.objects.filter(session=session).values_list("status", "error")) == [("done", "")]
    assert agent_texts(session) == ["The current price of GOOG is $178.42."]
