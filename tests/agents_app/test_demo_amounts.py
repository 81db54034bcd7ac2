"""The offline demo model reads the amount a person writes as they mean it. It read "$1,500" as $1.50
(the comma taken for a decimal point, the rest dropped), so "Please reimburse $1,500 for a laptop" was
reimbursed at once as $1.50 (under 100 needs no approval) instead of asking for approval of $1,500;
"$2,500.75" was $2.50 and "$1,500,000" $1.50."""

from __future__ import annotations

import pytest

from agents_app import services
from agents_app.demo.model import _parse_amount
from agents_app.models import Turn
from approvals.models import PendingCall


@pytest.mark.parametrize(
    "text, amount",
    [
        ("Please reimburse 200$ for meals", 200.0),
        ("Please reimburse $1,500 for a laptop", 1500.0),
        ("reimburse $1,500,000 for a building", 1_500_000.0),
        ("transfer $2,500.75 to Bob", 2500.75),
        ("reimburse 1.500,00 usd for a laptop", 1500.0),
        ("reimburse 1.500 dollars for a laptop", 1500.0),
        ("reimburse 12,50 dollars for a taxi", 12.5),
        ("reimburse 45.5 dollars for lunch", 45.5),
        ("reimburse $ 30 for a taxi", 30.0),
        ("reimburse 80 for a taxi", 80.0),
        ("no amount here", None),
    ],
)
def test_amounts_read_as_written(text, amount):
    assert _parse_amount(text) == amount


def test_a_reimbursement_written_with_a_thousands_comma_asks_for_approval_of_that_amount(demo, worker, wait):
    session = services.session_create(app_name="reimbursement_agent", user_id="requester")
    services.message_send(session=session, text="Please reimburse $1,500 for a laptop", streaming=False)
    ticket = wait(lambda: PendingCall.objects.filter(session=session).first(), what="a ticket")
    wait(lambda: not Turn.objects.filter(session=session, status__in=["queued", "running"]).exists(), what="the turn")
    assert (ticket.tool_name, ticket.tool_args) == ("ask_for_approval", {"purpose": "a laptop", "amount": 1500.0})
    assert ticket.policy_name == "Large reimbursements"
