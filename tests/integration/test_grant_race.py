"""The same standing grant given at once by many requests (the grants API and approvals with a grant on the
ticket page), against a real server on PostgreSQL: exactly one grant is made (the database's constraint: a
check before the INSERT alone lets concurrent requests each find none), every other request is 409 naming
it, nobody gets a 500, and an approval refused for its grant records nothing."""

from __future__ import annotations

from collections import Counter

from approvals.models import PendingCall, Response, StandingGrant
from tests.approvals_factories import session_for, ticket
from tests.integration.races import page_auth, post_at_once

pytest_plugins = ["tests.conftest_live"]

N = 24


def test_concurrent_like_grants_make_exactly_one(demo, live_asgi, api_token):
    session = session_for()
    given_from = ticket(session=session, status="approved")  # the API's grants come from approved tickets
    pages = [ticket(session=session, args={"purpose": f"taxi {i}", "amount": 10.0 + i}) for i in range(N // 2)]
    approvers = [demo["approver"], demo["approver2"], demo["admin"]]
    tokens = [api_token(u) for u in approvers]
    tabs = [page_auth(u) for u in approvers]
    requests: list[dict] = []
    for i in range(N):
        if i % 2:
            body = {"ticket": given_from.pk, "scope": "user", "minutes": 30 + i}
            requests.append({"label": "api", "url": "/api/grants", "json": body, "headers": tokens[i % 3]})
        else:
            page = pages[i // 2]
            form = {"approve-comment": "ok", "approve-grant_scope": "user", "approve-grant_for": "1"}
            form |= {"approve-grant_unit": "hours", "approve-args_hash": page.args_hash}
            cookies, headers = tabs[i % 3]
            requests.append(
                {"label": f"page {page.pk}", "url": f"/tickets/{page.pk}/approve/", "data": form}
                | {"cookies": cookies, "headers": headers}
            )

    results = post_at_once(live_asgi.url, requests)

    statuses = Counter(status for _, status, _ in results)
    assert [r[:2] for r in results if r[1] >= 500] == []
    grant = StandingGrant.objects.get()  # exactly one
    assert sum(1 for _, s, _ in results if 200 <= s < 300) == 1 and statuses[409] == N - 1, statuses
    for label, status, text in results:
        if status == 409:
            assert f"Standing grant #{grant.pk} already allows" in text, (label, text[:300])
    approved = set(PendingCall.objects.filter(status="approved").exclude(pk=given_from.pk).values_list("pk", flat=True))
    winner = [label for label, s, _ in results if 200 <= s < 300][0]
    assert approved == ({int(winner.split()[1])} if winner.startswith("page") else set())
    assert Response.objects.count() == len(approved)
