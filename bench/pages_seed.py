"""Seed a bench database at scale, as adkweb writes it: 100,000 tickets (10% open) and 1,000,000 events.

The rows are what the app stores: the event JSON comes from real runs of the demo agents through ADK's
Runner (InMemorySessionService), dumped with DjangoSessionService's own `event_to_json`, with their
denormalised columns (interrupt and response ids) from the same functions; tickets carry what
`pending_calls_record_event` records (kind, call, args, the tool's initial response, invocation), and
every session has its Turn rows and every decided ticket its Response rows. Only the ids (suffixed
per copy), timestamps and the reimbursement's purpose differ between copies. Written with COPY (bulk),
explicit ids, sequences reset and ANALYZE run afterwards. Used by bench/pages.py (and bench/fanout.py).
"""

from __future__ import annotations

import importlib
import json
import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pages_capture import Copier, capture_chat, capture_flows, event_ids
from pages_copy import TableWriter, analyze, copy_rows

PURPOSES = ["meals", "train", "hotel", "taxi", "flights", "conference", "books", "parking", "fuel", "training"]
BIG_FLOWS = 250  # the 2,000-event conversation: 250 reimbursement flows of 8 events
MARKER = "adkweb_bench_seed"  # a table recording what was seeded, so a second run skips seeding


@dataclass
class SeedInfo:
    tickets: int
    events: int
    big_session_pk: int
    open_ticket_pk: int  # an open ticket in a small conversation
    big_ticket_pk: int  # the open ticket in the 2,000-event conversation


def seeded() -> SeedInfo | None:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT to_regclass(%s)", [MARKER])
        if cur.fetchone()[0] is None:
            return None
        cur.execute(f"SELECT info FROM {MARKER}")
        row = cur.fetchone()
    return SeedInfo(**json.loads(row[0])) if row else None


def seed(n_tickets: int = 100_000, n_events: int = 1_000_000, open_share: float = 0.10) -> SeedInfo:
    """Write the whole data set into the (empty, migrated) Django database; returns what it made."""
    from django.contrib.auth.models import User
    from django.db import connection

    from agents_app.demo.setup import demo_setup
    from agents_app.models import AdkSession, StoredEvent, Turn
    from approvals.models import PendingCall, Response

    started = time.perf_counter()
    demo_setup()
    approvers = [User.objects.get(username="approver"), User.objects.get(username="admin")]
    flows, chat = capture_flows(), capture_chat()
    rng = random.Random(12)
    now = datetime.now(tz=UTC)
    span = timedelta(days=90)
    plan: list[tuple[str, bool]] = []  # (flow key, open) per ticket session, oldest first
    n_open = round(n_tickets * open_share)
    regular = n_tickets - BIG_FLOWS
    open_at = set(rng.sample(range(regular), n_open - 1))  # + the big conversation's last ticket
    for i in range(regular):
        r = rng.random()
        key = "transfer" if r < 0.10 else "support" if r < 0.20 else "reject" if r < 0.32 else "approve"
        plan.append((key, i in open_at))
    ids = {"session": 0, "event": 0, "turn": 0, "ticket": 0, "response": 0}
    sessions, turns, tickets, responses = [], [], [], []
    with connection.cursor() as cur:
        cur.execute("SET session_replication_role = replica")  # FKs are consistent by construction
    writer = TableWriter(StoredEvent).__enter__()  # events stream straight into COPY (1M rows)
    events = writer
    copiers = {k: Copier(f.ids) for k, f in flows.items()}
    templates = {k: ([json.dumps(e) for e in f.phase1], [json.dumps(e) for e in f.phase2]) for k, f in flows.items()}
    denorm = {k: ([event_ids(e) for e in f.phase1], [event_ids(e) for e in f.phase2]) for k, f in flows.items()}

    def next_id(kind: str) -> int:
        ids[kind] += 1
        return ids[kind]

    def add_events(session_pk: int, turn_pk: int, key: str, phase: int, suffix: str, ts: float, purpose: str) -> int:
        """Events of one phase of a flow; returns the pk of the long-running call's event (phase 1)."""
        call_event = 0
        for tmpl, (interrupts, responded) in zip(templates[key][phase], denorm[key][phase], strict=True):
            data = json.loads(copiers[key].text(tmpl, suffix, purpose))
            ts += 0.05
            data["timestamp"] = ts
            pk = next_id("event")
            if interrupts:
                call_event = pk
            events.write(
                dict(
                    id=pk,
                    session_id=session_pk,
                    event_id=data["id"],
                    invocation_id=data.get("invocationId") or data.get("invocation_id") or "",
                    author=data.get("author", ""),
                    timestamp=ts,
                    data=data,
                    interrupt_ids=[i + suffix for i in interrupts],
                    response_ids=[i + suffix for i in responded],
                    turn_id=turn_pk,
                )
            )
        return call_event

    def add_turn(session_pk: int, kind: str, content: dict, at: datetime, status: str = "done") -> int:
        pk = next_id("turn")
        turns.append(
            dict(
                id=pk,
                session_id=session_pk,
                kind=kind,
                content=content,
                streaming=True,
                status=status,
                attempts=1,
                created_at=at,
                started_at=at + timedelta(milliseconds=5),
                finished_at=at + timedelta(milliseconds=60),
                error="The model failed." if status == "failed" else "",
            )
        )
        return pk

    def add_flow(session_pk: int, user: str, key: str, is_open: bool, at: datetime, n: int) -> tuple[int, float]:
        """One ticket flow in a session: phase 1 always, phase 2 if the ticket is decided."""
        flow, suffix, purpose = flows[key], f"-{n}", PURPOSES[n % len(PURPOSES)]
        ts = at.timestamp()
        first = json.loads(copiers[key].text(templates[key][0][0], suffix, purpose))
        t1 = add_turn(session_pk, "message", first["content"], at)
        call_event = add_events(session_pk, t1, key, 0, suffix, ts, purpose)
        ticket_pk = next_id("ticket")
        args = json.loads(copiers[key].text(json.dumps(flow.call["args"]), suffix, purpose))
        ticket = dict(
            id=ticket_pk,
            session_id=session_pk,
            event_id=call_event,
            app_name=flow.app,
            requester=user,
            invocation_id=flow.call["invocation_id"] + suffix,
            kind=flow.kind,
            call_id=flow.call["id"] + suffix,
            call_name=flow.call["name"],
            args=args,
            initial_response=flow.initial_response,
            tool_name=flow.tool_name,
            status="pending",
            created_at=at,
            updated_at=at,
        )
        tickets.append(ticket)
        ts += 0.05 * len(flow.phase1)
        approver = approvers[n % 2]
        if n % 10 == 0:  # an update before the decision (or while it stays open)
            responses.append(
                dict(
                    id=next_id("response"),
                    pending_call_id=ticket_pk,
                    action="update",
                    final=False,
                    payload={"status": "in_progress", "message": "checking receipts"},
                    comment="checking receipts",
                    actor_id=approver.pk,
                    created_at=at + timedelta(minutes=5),
                )
            )
            ticket["status"] = "in_progress"
        if is_open:
            if n % 20 == 1:
                ticket["assigned_to_id"] = approver.pk
            return ticket_pk, ts
        decided = at + timedelta(minutes=30)
        fr = {"id": flow.call["id"] + suffix, "name": flow.call["name"], "response": flow.answer}
        t2 = add_turn(session_pk, "function_response", {"role": "user", "parts": [{"function_response": fr}]}, decided)
        add_events(session_pk, t2, key, 1, suffix, decided.timestamp(), purpose)
        ts = decided.timestamp() + 0.05 * len(flow.phase2)
        action = "reject" if key == "reject" or flow.answer.get("confirmed") is False else "approve"
        responses.append(
            dict(
                id=next_id("response"),
                pending_call_id=ticket_pk,
                action=action,
                final=True,
                payload=flow.answer,
                comment="",
                actor_id=approver.pk,
                turn_id=t2,
                created_at=decided,
            )
        )
        ticket.update(
            status="rejected" if action == "reject" else "approved",
            closed_at=decided,
            closed_by_id=approver.pk,
            updated_at=decided,
        )
        return ticket_pk, ts

    def add_session(app: str, user: str, at: datetime) -> dict:
        row = dict(
            id=next_id("session"),
            app_name=app,
            user_id=user,
            session_id=f"bench-{ids['session']}",
            state={},
            create_time=at.timestamp(),
            update_time=at.timestamp(),
            revision=0,
            lease_owner="",
        )
        sessions.append(row)
        return row

    # The 2,000-event conversation (oldest), then one ticket per session, then ticket-less chats.
    big = add_session("reimbursement_agent", "requester", now - span - timedelta(days=1))
    big_ticket = 0
    for k in range(BIG_FLOWS):
        at = now - span - timedelta(days=1) + timedelta(minutes=k)
        big_ticket, big["update_time"] = add_flow(big["id"], "requester", "approve", k == BIG_FLOWS - 1, at, 10**7 + k)
    open_ticket = 0
    for i, (key, is_open) in enumerate(plan):
        at = now - span + span * (i / len(plan))
        s = add_session(flows[key].app, f"user-{i % 1000}", at)
        pk, s["update_time"] = add_flow(s["id"], s["user_id"], key, is_open, at, i)
        if is_open and key == "approve" and not open_ticket:
            open_ticket = pk
    chat_copier = Copier(
        {e["id"] for e in chat}
        | {e["invocationId"] for e in chat if e.get("invocationId")}
        | {p["functionCall"]["id"] for e in chat for p in e.get("content", {}).get("parts", []) if "functionCall" in p}
    )
    chat_tmpl = [json.dumps(e) for e in chat]
    chat_denorm = [event_ids(e) for e in chat]
    j = 0
    while ids["event"] < n_events:
        at = now - span + span * rng.random()
        s = add_session("stock_agent", f"user-{j % 1000}", at)
        first = json.loads(chat_tmpl[0])
        t = add_turn(s["id"], "message", first["content"], at, status="failed" if j % 100 == 0 else "done")
        ts = at.timestamp()
        for tmpl, (interrupts, responded) in list(zip(chat_tmpl, chat_denorm, strict=True))[: n_events - ids["event"]]:
            data = json.loads(chat_copier.text(tmpl, f"-c{j}"))
            ts += 0.05
            data["timestamp"] = ts
            events.write(
                dict(
                    id=next_id("event"),
                    session_id=s["id"],
                    event_id=data["id"],
                    invocation_id=data.get("invocationId", ""),
                    author=data.get("author", ""),
                    timestamp=ts,
                    data=data,
                    interrupt_ids=interrupts,
                    response_ids=responded,
                    turn_id=t,
                )
            )
        s["update_time"] = ts
        j += 1
    writer.__exit__(None, None, None)
    built = time.perf_counter()
    for model, rows in ((AdkSession, sessions), (Turn, turns), (PendingCall, tickets), (Response, responses)):
        copy_rows(model, rows)
    with connection.cursor() as cur:
        cur.execute("SET session_replication_role = origin")
        for model in (AdkSession, Turn, StoredEvent, PendingCall, Response):
            table = model._meta.db_table
            cur.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))")
    # COPY saves no model: the sessions' stored status is computed once, as the app's migration does,
    # after ANALYZE (without statistics the planner scans every turn for each of the sessions: hours).
    from agents_app.session_status import sessions_status_refresh

    # The replica role kept the triggers off too: who takes part in which ticket (the inbox's "mine")
    # is filled as the migration that made the table filled it (a tree from before it has no table).
    try:
        participants = importlib.import_module("approvals.migrations.0010_ticket_participant")
    except ModuleNotFoundError:
        participants = None
    with connection.cursor() as cur:
        if participants is not None:
            cur.execute(participants.BACKFILL)
        cur.execute("ANALYZE")
    sessions_status_refresh(AdkSession, Turn, PendingCall)
    info = SeedInfo(
        tickets=len(tickets),
        events=writer.count,
        big_session_pk=big["id"],
        open_ticket_pk=open_ticket,
        big_ticket_pk=big_ticket,
    )
    with connection.cursor() as cur:
        cur.execute(f"CREATE TABLE {MARKER} (info text)")
        cur.execute(f"INSERT INTO {MARKER} VALUES (%s)", [json.dumps(info.__dict__)])
    from django.db import connection as c

    c.close()
    analyze()
    n_open = sum(t["status"] in ("pending", "in_progress") for t in tickets)
    print(
        f"seeded {len(sessions)} sessions, {len(tickets)} tickets ({n_open} open), {writer.count} events, "
        f"{len(turns)} turns, {len(responses)} responses: events in {built - started:.0f} s, "
        f"the rest and VACUUM ANALYZE in {time.perf_counter() - built:.0f} s"
    )
    return info
