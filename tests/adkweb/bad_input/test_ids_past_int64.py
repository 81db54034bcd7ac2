"""A ticket id in the URL past a 64-bit integer (`<int:...>` takes any digits): the ticket's reads are
compiled once (adkweb.compiled_objects) and bound the id as it came, and SQLite's driver refused it
(OverflowError: a 500 on every ticket URL, page and API). The ORM answers such an id with no rows;
now so do the compiled reads, and the ticket is a 404 like any unknown one."""

from __future__ import annotations

import pytest

from tests.adkweb.bad_input.sweep import Objs, _client, _refusal, counts

PAST = (str(2**63), "99999999999999999999")


@pytest.mark.parametrize("who", ["approver", "requester"])
def test_ticket_ids_past_int64_are_404s(objs: Objs, who: str):
    c = _client(objs, who)
    failures: list[str] = []
    for raw in PAST:
        for method, path, api in (
            ("GET", f"/api/pending-calls/{raw}", True),
            ("POST", f"/api/pending-calls/{raw}/approve", True),
            ("POST", f"/api/pending-calls/{raw}/responses", True),
            ("GET", f"/tickets/{raw}/", False),
            ("POST", f"/tickets/{raw}/approve/", False),
            ("POST", f"/notifications/tickets/{raw}/link/", False),
        ):
            before = counts()
            response = c.generic(method, path, '{"response": {"status": "approved"}}', content_type="application/json")
            failures += _refusal(f"{method} {path}", response, before, counts(), api=api)
            if response.status_code != 404:
                failures.append(f"{method} {path}: {response.status_code}, expected 404")
    assert not failures, "\n".join(failures)
