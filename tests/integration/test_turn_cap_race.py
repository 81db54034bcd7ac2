"""The per-person cap on queued and running turns holds under concurrency on PostgreSQL: two messages
racing for the last slot, one waits on the person's row and, once the other commits, counts its turn
and is refused (agents_app.services.turn_quota_check: the lock, then the count in a statement of its
own, in one round trip)."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction

from agents_app import services
from agents_app.content import text_content
from agents_app.models import Turn
from agents_app.services import TooManyTurns
from tests.integration.races import waiting_on_a_lock

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_messages_racing_for_the_last_slot_one_is_refused(demo, settings):
    settings.ADKWEB_MAX_QUEUED_TURNS_PER_USER = 2
    requester = demo["requester"]
    first = services.session_create(app_name="stock_agent", user_id="requester", session_id="race-a")
    second = services.session_create(app_name="stock_agent", user_id="requester", session_id="race-b")
    Turn.objects.create(session=first, kind=Turn.Kind.MESSAGE, content={}, created_by=requester)  # 1 of 2
    holding, release = threading.Event(), threading.Event()
    outcome: dict[str, object] = {}

    def take_the_last_slot() -> None:
        try:
            with transaction.atomic():
                services.turn_add(session=first, content=text_content("a"), actor=requester, enqueue=False)
                holding.set()
                release.wait(20)
        finally:
            connection.close()

    def race_for_it() -> None:
        try:
            with transaction.atomic():
                services.turn_add(session=second, content=text_content("b"), actor=requester, enqueue=False)
            outcome["b"] = "queued"
        except TooManyTurns as exc:
            outcome["b"] = exc
        finally:
            connection.close()

    a = threading.Thread(target=take_the_last_slot)
    a.start()
    assert holding.wait(20)
    b = threading.Thread(target=race_for_it)
    b.start()
    deadline = time.monotonic() + 10
    while not waiting_on_a_lock() and time.monotonic() < deadline and b.is_alive():
        time.sleep(0.02)
    assert waiting_on_a_lock(), outcome  # the second waits on the person's row, not counting yet
    release.set()
    a.join(20)
    b.join(20)
    assert isinstance(outcome.get("b"), TooManyTurns), outcome
    assert "2 agent turns queued or running" in str(outcome["b"])
    assert Turn.objects.filter(created_by=requester).count() == 2  # nothing of the second was queued
