"""Tamper evidence: each decision is chained to the one before it in the transaction that stores it;
`manage.py audit_verify` passes on a clean chain and names the first row changed, removed or added
behind the application's back (raw SQL)."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from approvals import services
from approvals.chain import GENESIS, decision_fields, link_hash
from approvals.models import DecisionChain, Response
from tests.approvals_factories import ticket


def _verify() -> str:
    out = io.StringIO()
    call_command("audit_verify", stdout=out)
    return out.getvalue()


def _decisions(demo, n: int = 4) -> list[Response]:
    rows = []
    for i in range(n):
        call = ticket()
        if i % 2:
            rows.append(services.ticket_reject(ticket=call, actor=demo["approver"], reason=f"no {i}"))
        else:
            rows.append(services.ticket_approve(ticket=call, actor=demo["approver"], comment=f"ok {i}"))
    return rows


def _sql(statement: str, *params) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


def _assert_chained(rows: list[Response]) -> None:
    """The stored rows are the whole chain, in order: numbered from 1, each hash linking the previous
    one's (GENESIS first) to its own fields, and the head at the last."""
    assert [r.chain_seq for r in rows] == list(range(1, len(rows) + 1))
    previous = GENESIS
    for row in rows:
        assert row.chain_hash == link_hash(previous, decision_fields(row))
        previous = row.chain_hash
    head = DecisionChain.objects.get()
    assert (head.length, head.last_hash, head.last_response_id) == (len(rows), previous, rows[-1].pk)


def test_each_decision_is_chained_to_the_previous_one(demo):
    rows = [Response.objects.get(pk=r.pk) for r in _decisions(demo, 3)]
    _assert_chained(rows)
    # What the link covers: who (the snapshot), when, what was shown and what was sent.
    fields = decision_fields(rows[0])
    assert fields["who"]["username"] == "approver" and fields["shown"] == rows[0].args_hash
    assert fields["sent"]["payload"] == rows[0].payload and fields["when"].endswith("+00:00")


def test_audit_verify_passes_on_a_clean_chain(demo):
    assert _verify() == "Decision chain intact: 0 decision(s).\n"
    _decisions(demo)
    out = _verify()
    assert out.startswith("Decision chain intact: 4 decision(s), last hash ")


@pytest.mark.parametrize(
    "column, value",
    [("comment", "approved, honest"), ("actor_username", "someone_else"), ("args_hash", "0" * 64)],
)
def test_audit_verify_names_a_row_changed_with_raw_sql(demo, column, value):
    rows = _decisions(demo)
    target = rows[1]
    _sql(f"UPDATE approvals_response SET {column} = %s WHERE id = %s", value, target.pk)
    with pytest.raises(CommandError) as failed:
        _verify()
    message = str(failed.value)
    assert message.startswith(f"Decision chain broken at response #{target.pk} (chain position 2, ")
    assert "changed after it was written" in message


def test_audit_verify_names_a_payload_change_and_a_rehashed_row(demo):
    rows = _decisions(demo)
    target, after = rows[2], rows[3]
    _sql("UPDATE approvals_response SET payload = %s WHERE id = %s", '{"status": "approved"}', target.pk)
    with pytest.raises(CommandError, match=rf"response #{target.pk} \(chain position 3"):
        _verify()
    # A forger who also recomputes that row's hash breaks the next link instead.
    forged = Response.objects.get(pk=target.pk)
    previous = Response.objects.get(pk=rows[1].pk).chain_hash
    _sql(
        "UPDATE approvals_response SET chain_hash = %s WHERE id = %s",
        link_hash(previous, decision_fields(forged)),
        target.pk,
    )
    with pytest.raises(CommandError, match=rf"response #{after.pk} \(chain position 4"):
        _verify()


def test_audit_verify_names_a_removed_row(demo):
    rows = _decisions(demo)
    _sql("DELETE FROM approvals_response WHERE id = %s", rows[1].pk)
    with pytest.raises(
        CommandError, match=rf"response #{rows[2].pk} \(chain position 3, .*position 2 before it are missing"
    ):
        _verify()


def test_audit_verify_notices_a_truncated_tail(demo):
    rows = _decisions(demo)
    _sql("UPDATE approvals_decisionchain SET last_response_id = NULL")
    _sql("DELETE FROM approvals_response WHERE id = %s", rows[-1].pk)
    with pytest.raises(CommandError, match="records 4 decisions .* holds 3"):
        _verify()


def test_the_data_migration_chains_existing_decisions(demo):
    from importlib import import_module

    from django.apps import apps

    rows = _decisions(demo, 3)
    _sql("UPDATE approvals_response SET chain_seq = NULL, chain_hash = ''")
    _sql("DELETE FROM approvals_decisionchain")
    import_module("approvals.migrations.0007_decision_chain").chain_existing(apps, None)
    assert _verify().startswith("Decision chain intact: 3 decision(s)")
    assert list(Response.objects.order_by("chain_seq").values_list("pk", flat=True)) == [r.pk for r in rows]


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's path (PostgreSQL: test_record_postgres)")
def test_a_decision_is_linked_in_compiled_statements_on_sqlite(demo):
    """After the first decision ever (the ORM path makes the head), each decision is linked from its
    row read in a statement compiled once per process (the bytes hashed as the ORM reads them back:
    a bool, a JSON payload, a datetime, text beyond ASCII) and written in two plain UPDATEs."""
    from django.test.utils import CaptureQueriesContext

    first = _decisions(demo, 1)[0]
    rows = []
    for i, comment in enumerate(["d\u00e9j\u00e0 vu \u2014 ok", ""]):
        with CaptureQueriesContext(connection) as seen:
            if i:
                rows.append(services.ticket_reject(ticket=ticket(), actor=demo["approver"], reason="no"))
            else:
                rows.append(services.ticket_approve(ticket=ticket(), actor=demo["approver"], comment=comment))
        sql = [q["sql"] for q in seen.captured_queries]
        assert any(s.startswith("UPDATE approvals_response SET chain_seq") for s in sql), sql
        assert any(s.startswith("UPDATE approvals_decisionchain SET length") for s in sql), sql
    _assert_chained([Response.objects.get(pk=r.pk) for r in [first, *rows]])
    assert _verify().startswith("Decision chain intact: 3 decision(s)")
