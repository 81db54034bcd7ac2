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


@pytest.mark.parametrize("cursor", ["after", "before"])
def test_cursors_whose_row_id_is_past_int64_are_no_cursors(objs: Objs, cursor: str):
    """A pager's cursor (`<sort key>_<row id>`) with a row id past a 64-bit integer: the inbox's "mine"
    list bounds its rows with SQL of its own (adkweb.paging_keys._key_bound), which bound the id as it
    came, and SQLite's driver refused it (OverflowError: a 500, page and API). Now it is no cursor, as
    any text that is none: the page shows its first page, the API says it is not a cursor (400)."""
    c = _client(objs, "approver")
    failures: list[str] = []
    for raw in (*PAST, "9" * 25):
        for mine in ("", "&mine=1", "&status=all&mine=1"):
            query = f"?{cursor}=1_{raw}&page=2{mine}"
            before = counts()
            page = c.get(f"/{query}")
            if page.status_code != 200:
                failures.append(f"GET /{query}: {page.status_code}, expected the inbox's first page")
            api = c.get(f"/api/pending-calls{query}")
            failures += _refusal(f"GET /api/pending-calls{query}", api, before, counts(), api=True)
            if api.status_code == 400 and "is not a cursor" not in api.json()["detail"]:
                failures.append(f"GET /api/pending-calls{query}: {api.json()['detail']!r}")
    assert not failures, "\n".join(failures)
