"""The audit exports through the ASGI stack (services and embedded mode serve ASGI only): CSV and
JSON Lines content, filters, escaping against spreadsheet formulas, and streaming with flat memory
(rows are read in chunks and written as they are read)."""

from __future__ import annotations

import csv
import gc
import io
import json
import tracemalloc

import pytest
from asgiref.sync import sync_to_async
from django.http import StreamingHttpResponse
from django.test import AsyncClient

from agents_app.tokens import token_create
from approvals import audit, services
from approvals.models import Response
from tests.approvals_factories import ticket

FORMULA = '=HYPERLINK("http://evil.example","click")'


@pytest.fixture
def exported(transactional_db, demo, monkeypatch):
    # These decisions commit: no worker runs their turns (on PostgreSQL one would, during the flush).
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", lambda **kwargs: True)
    call = ticket()
    approve = services.ticket_approve(ticket=call, actor=demo["approver"], comment=FORMULA)
    other = ticket(tool_name="transfer_money")
    reject = services.ticket_reject(ticket=other, actor=demo["admin"], reason='line one\nline "two", three')
    return {
        "approve": Response.objects.select_related("pending_call__session").get(pk=approve.pk),
        "reject": Response.objects.get(pk=reject.pk),
        "demo": demo,
    }


async def _get(user, url: str):
    client = AsyncClient()
    await client.aforce_login(user)
    return await client.get(url)


async def _body(response) -> str:
    return b"".join([chunk async for chunk in response.streaming_content]).decode()


async def test_jsonl_export(exported):
    r = await _get(exported["demo"]["observer"], "/audit/export.jsonl")
    assert r.status_code == 200 and isinstance(r, StreamingHttpResponse)
    assert r["Content-Type"] == "application/x-ndjson; charset=utf-8"
    assert r["Content-Disposition"].startswith('attachment; filename="adkweb-decisions-')
    rows = [json.loads(line) for line in (await _body(r)).splitlines()]
    approve, reject = exported["approve"], exported["reject"]
    assert [row["id"] for row in rows] == [reject.pk, approve.pk]
    first = rows[1]
    assert first == {
        "id": approve.pk,
        "chain_seq": approve.chain_seq,
        "chain_hash": approve.chain_hash,
        "created_at": approve.created_at.isoformat(),
        "ticket": approve.pending_call_id,
        "agent": "reimbursement_agent",
        "tool": "ask_for_approval",
        "kind": "long_running",
        "requester": "requester",
        "session_id": approve.pending_call.session.session_id,
        "conversation_archived_at": None,
        "decided_by": "approver",
        "decided_by_name": "approver",
        "source": "person",
        "action": "approve",
        "final": True,
        "comment": FORMULA,  # JSON is data: no formula escaping needed
        "args_hash": approve.args_hash,
        "payload": approve.payload,
        "edited_args": None,
        "counted": None,  # it closed no quorum ticket
    }
    filtered = await _get(exported["demo"]["observer"], "/audit/export.jsonl?outcome=reject&tool=transfer_money")
    assert [json.loads(line)["id"] for line in (await _body(filtered)).splitlines()] == [reject.pk]


async def test_csv_export(exported):
    r = await _get(exported["demo"]["approver"], "/audit/export.csv")
    assert r.status_code == 200 and isinstance(r, StreamingHttpResponse)
    assert r["Content-Type"] == "text/csv; charset=utf-8"
    rows = list(csv.reader(io.StringIO(await _body(r))))
    assert rows[0] == list(audit.EXPORT_FIELDS)
    by_id = {int(row[0]): dict(zip(rows[0], row, strict=True)) for row in rows[1:]}
    approve, reject = by_id[exported["approve"].pk], by_id[exported["reject"].pk]
    assert approve["comment"] == "'" + FORMULA  # a spreadsheet shows it as text, never runs it
    assert reject["comment"] == 'line one\nline "two", three'  # quoted, not split
    assert json.loads(approve["payload"]) == exported["approve"].payload
    assert approve["final"] == "True" and approve["conversation_archived_at"] == ""


async def test_exports_refuse_requesters_and_bad_filters(exported):
    r = await _get(exported["demo"]["requester"], "/audit/export.csv")
    assert r.status_code == 403
    r = await _get(exported["demo"]["approver"], "/audit/export.jsonl?since=nope")
    assert r.status_code == 400 and r.content.startswith(b"Bad filter: since:")


async def _token_get(user, url: str):
    """GET as an API client: a token, no login session."""
    _, key = await sync_to_async(token_create)(user=user, name="audit export")
    return await AsyncClient().get(url, headers={"Authorization": f"Token {key}"})


async def test_api_exports_serve_token_clients_with_the_pages_filters_and_refusals(exported):
    demo, approve, reject = exported["demo"], exported["approve"], exported["reject"]
    observer = demo["observer"]
    r = await _token_get(observer, "/api/audit/decisions.jsonl?outcome=reject&tool=transfer_money")
    assert r.status_code == 200 and r["Content-Type"] == "application/x-ndjson; charset=utf-8"
    assert [json.loads(line)["id"] for line in (await _body(r)).splitlines()] == [reject.pk]
    r = await _token_get(observer, "/api/audit/decisions.csv")
    assert r.status_code == 200 and r["Content-Type"] == "text/csv; charset=utf-8"
    rows = list(csv.reader(io.StringIO(await _body(r))))
    assert rows[0] == list(audit.EXPORT_FIELDS)
    assert [int(row[0]) for row in rows[1:]] == [reject.pk, approve.pk]
    assert rows[2][list(audit.EXPORT_FIELDS).index("comment")] == "'" + FORMULA

    r = await AsyncClient().get("/api/audit/decisions.csv")
    assert r.status_code == 401 and "Token" in r.json()["detail"]
    r = await _token_get(demo["requester"], "/api/audit/decisions.jsonl")
    assert r.status_code == 403 and "audit trail" in r.json()["detail"]
    r = await _token_get(observer, "/api/audit/decisions.jsonl?since=2026-02-01&until=2026-01-01")
    assert r.status_code == 400 and r.json()["detail"].startswith("Bad filter:")
    assert "ends before it starts" in r.json()["detail"]


def _many(n: int) -> None:
    call = Response.objects.first().pending_call
    Response.objects.bulk_create(
        [
            Response(
                pending_call=call,
                action="update",
                payload={"status": "pending", "n": i, "pad": "x" * 200},
                final=False,
                comment=f"row {i}",
                actor_username="bulk",
                actor_name="Bulk",
            )
            for i in range(n)
        ],
        batch_size=2000,
    )


async def _stream_peak(user, url: str) -> tuple[int, int]:
    """(lines, peak traced bytes) while the export is consumed chunk by chunk."""
    gc.collect()
    tracemalloc.start()
    try:
        r = await _get(user, url)
        lines = 0
        async for chunk in r.streaming_content:
            lines += chunk.count(b"\n")
        return lines, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


async def test_exports_stream_with_flat_memory(exported, monkeypatch):
    monkeypatch.setattr(audit, "CHUNK", 500)  # the same code path at a quarter of the size (2,000 in use)
    user = exported["demo"]["observer"]
    await sync_to_async(_many)(1_500)
    await _stream_peak(user, "/audit/export.csv?outcome=reject")  # warm up: imports, first queries
    small = {fmt: await _stream_peak(user, f"/audit/export.{fmt}") for fmt in ("jsonl", "csv")}
    await sync_to_async(_many)(4_500)
    big = {fmt: await _stream_peak(user, f"/audit/export.{fmt}") for fmt in ("jsonl", "csv")}
    # Lines: the rows, the two decisions (one comment spans two lines), the CSV's header.
    assert [small["jsonl"][0], big["jsonl"][0], small["csv"][0], big["csv"][0]] == [1_502, 6_002, 1_504, 6_004]
    # Four times the rows (3 chunks, then 12), about the same memory: chunks of audit.CHUNK rows,
    # written as they are read (a buffered export would hold every row: about four times the peak).
    for fmt in ("jsonl", "csv"):
        assert big[fmt][1] < 1.5 * small[fmt][1], (fmt, small[fmt][1], big[fmt][1])
