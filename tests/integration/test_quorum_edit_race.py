"""An approver edits a 2-of-N ticket's arguments with their approval while another approves it without
saying which arguments (no argsHash), at the same moment, against a real server on PostgreSQL: in
either order the bare approval never counts toward the edited arguments. Its sender came first: it
counted toward the arguments the agent asked for, and the edit started the count again; it came
second: refused with 409. The ticket stays open (1 of 2, the editor's), the agent is not resumed."""

from __future__ import annotations

from collections import Counter

from agents_app.models import Turn
from approvals import selectors
from approvals.models import PendingCall
from tests.approvals.policy_helpers import open_ticket, person, team
from tests.integration.races import post_at_once

pytest_plugins = ["tests.conftest_live"]

BIG = {"purpose": "laptop", "amount": 2500.0}  # the demo's "Large reimbursements": finance, 2 of N
EDITED = {"purpose": "laptop", "amount": 1800.0}
ROUNDS = 12


def test_a_bare_approval_racing_an_edit_never_counts_toward_the_edited_arguments(demo, live_asgi, api_token):
    fay = person("fay", team("finance"), approver=True)
    editor, bare = api_token(demo["approver2"]), api_token(fay)
    tickets = [open_ticket(args=BIG) for _ in range(ROUNDS)]
    requests = []
    for t in tickets:
        url = f"/api/pending-calls/{t.pk}/approve"
        requests.append({"label": f"edit {t.pk}", "url": url, "headers": editor, "json": {"editedArgs": EDITED}})
        requests.append({"label": f"bare {t.pk}", "url": url, "headers": bare, "json": {"comment": "ok"}})

    results = post_at_once(live_asgi.url, requests)

    statuses = Counter((label.split()[0], status) for label, status, _ in results)
    assert set(statuses) <= {("edit", 201), ("bare", 201), ("bare", 409)}, results
    assert statuses[("edit", 201)] == ROUNDS
    for t in tickets:
        ticket = PendingCall.objects.get(pk=t.pk)
        assert (ticket.status, ticket.edited_args) == ("pending", EDITED), results
        assert [r.actor_username for r in selectors.ticket_approvals(ticket=ticket)] == ["approver2"]
    assert not Turn.objects.filter(session__in=[t.session_id for t in tickets]).exists()
