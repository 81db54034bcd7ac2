"""Eager runs in embedded mode (SQLite, the in-memory channel layer): with ADKWEB_EAGER_RUN on, the
seed's client loop over `/run` completes with no worker running at all: the live server's own
drain slots ran both turns (the lease and claim of the ORM path), with the answers and the ticket
the worker path gives (tests/agents_app/test_api_adk.py)."""

from __future__ import annotations

import pytest

from agents_app import eager
from agents_app.models import Turn
from approvals.models import PendingCall
from tests.conftest import wait_for
from tests.live_server import seed_client_loop

pytest_plugins = ["tests.conftest_live"]


@pytest.fixture
def eager_on(settings):
    settings.ADKWEB_EAGER_RUN, settings.ADKWEB_EAGER_SLOTS = True, 2
    settings.ADKWEB_API_RUN_TIMEOUT = 20  # a turn nobody runs fails the test in 20 s, not 120
    yield
    wait_for(lambda: eager.busy() == 0, timeout=30, what="the eager drains to end")


def test_the_seed_loop_runs_in_the_web_process_with_no_worker(demo, eager_on, adk_client):
    ran = eager.drains_run()
    client = adk_client(demo["approver"])
    loop = seed_client_loop(client)
    first, second = loop["first"], loop["second"]
    assert all(e["author"] == "reimbursement_agent" for e in first + second)
    assert {e["invocationId"] for e in second} == {first[0]["invocationId"]}
    assert loop["call"]["args"] == {"purpose": "meals", "amount": 200.0}
    wait_for(lambda: eager.drains_run() - ran == 2, timeout=10, what="both turns run on the live server's slots")
    assert list(Turn.objects.values_list("status", "attempts")) == [("done", 1), ("done", 1)]
    ticket = PendingCall.objects.get(call_id=loop["call"]["id"])
    assert ticket.status == "approved" and ticket.closed_by == demo["approver"]
    assert PendingCall.objects.count() == 1
