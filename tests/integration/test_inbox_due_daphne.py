"""Under daphne, whose inbox sockets take the rows by the channel layer's direct delivery (approvals.consumers
frames_now, no database): a row whose due time comes while the inbox is open turns "past due" then."""

from __future__ import annotations

import sys
import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone
from websockets.sync.client import connect as ws_connect

from approvals.events import notify_ticket_changed
from approvals.models import PendingCall
from tests.approvals.policy_helpers import open_ticket

from . import processes

pytestmark = pytest.mark.django_db(transaction=True)
AHEAD = 2.0  # seconds


def _daphne() -> tuple[processes.Service, str]:
    port = processes.free_port()
    args = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "adkweb.asgi:application"]
    web = processes.Service(args, processes.service_env(settings.REDIS_URL), ready="Listening on TCP address")
    return web.start(), f"127.0.0.1:{port}"


def _row(ws, ticket: PendingCall, within: float) -> str:
    deadline = time.monotonic() + within
    while (left := deadline - time.monotonic()) > 0:
        frame = ws.recv(timeout=left)
        if f'id="pending-call-{ticket.pk}"' in frame:
            return frame
    raise AssertionError(f"no row of ticket #{ticket.pk}")


def test_a_row_pushed_to_an_open_inbox_turns_past_due_at_its_due_time_under_daphne(demo):
    client = Client()
    client.force_login(demo["approver"])
    headers = {"Cookie": f"sessionid={client.cookies['sessionid'].value}"}
    web, host = _daphne()
    try:
        ws = ws_connect(f"ws://{host}/ws/approvals/", additional_headers={**headers, "Origin": f"http://{host}"})
        time.sleep(1.2)  # past the socket's first RECOUNT_SECONDS: rows come by direct delivery
        ticket = open_ticket()
        notify_ticket_changed(ticket_id=ticket.pk, session_pk=ticket.session_id, opened=True)
        _row(ws, ticket, 10)  # added to the page, no due time yet
        due = timezone.now() + timedelta(seconds=AHEAD)
        PendingCall.objects.filter(pk=ticket.pk).update(due_at=due)
        notify_ticket_changed(ticket_id=ticket.pk, session_pk=ticket.session_id)
        frame = _row(ws, ticket, 10)
        assert "due in" in frame and "past due" not in frame, frame
        frame = _row(ws, ticket, AHEAD + 5)
        assert time.time() >= due.timestamp(), "not before the due time"
        assert "past due: it expires" in frame, frame
        ws.close()
    finally:
        web.stop()
