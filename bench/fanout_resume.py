"""bench/fanout.py's conversations waiting on a ticket (made through the requester's page, the way a
person makes them), and its click-to-resume part: POST approve -> the first resumed event on the
conversation's socket, split with the Turn row's and the stored event's timestamps."""

from __future__ import annotations

import argparse
import asyncio
import re
import time

from benchlib import pct
from wsclients import Profile, Socket, Web, settle, wait_all

EVENT_FRAME = re.compile(r'hx-swap-oob="beforeend:#conversation-events"')


def open_ticket(session_pk: int, timeout: float = 30) -> object:
    """Wait for the ticket the worker opens in a session (by polling the database from here)."""
    from approvals.models import PendingCall

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ticket = PendingCall.objects.filter(session_id=session_pk, status="pending").first()
        if ticket is not None:
            return ticket
        time.sleep(0.02)
    raise RuntimeError(f"no ticket opened in session {session_pk}")


async def new_ticket(web_requester: Web, *, text: str = "Please reimburse 200$ for meals") -> tuple[int, int, int]:
    """A reimbursement conversation waiting on its ticket: (session pk, ticket pk, last event pk)."""
    from asgiref.sync import sync_to_async

    from agents_app.models import StoredEvent
    from agents_app.services import session_create

    session = await sync_to_async(session_create)(app_name="reimbursement_agent", user_id="requester")
    page = f"/sessions/{session.pk}/"
    await web_requester.post(f"{page}messages/", {"text": text}, page)
    ticket = await sync_to_async(open_ticket)(session.pk)
    await sync_to_async(turns_done)(session.pk)  # the rest of that turn (the model's reply) lands first
    last = await sync_to_async(
        lambda: StoredEvent.objects.filter(session_id=session.pk).order_by("-id").values_list("pk", flat=True).first()
    )()
    return session.pk, ticket.pk, last or 0


def turns_done(session_pk: int, timeout: float = 30) -> None:
    """Wait until no turn of the session is queued or running (a fixed sleep was too short under load:
    the first turn's last event then reached a resume socket as if it were the resumed run's)."""
    from agents_app.models import Turn

    deadline = time.monotonic() + timeout
    while Turn.objects.filter(session_id=session_pk, status__in=["queued", "running"]).exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the turns of session {session_pk} did not finish")
        time.sleep(0.02)


async def warm_up(requester: Web, approver: Web, n: int = 4) -> None:
    """Tickets opened and approved at once, untimed: every worker child and the web process import and
    connect before anything is measured (a cold worker child adds seconds to its first turn)."""
    tickets = await asyncio.gather(*(new_ticket(requester) for _ in range(n)))
    for _session_pk, ticket_pk, _ in tickets:
        page = f"/tickets/{ticket_pk}/"
        await approver.post(f"{page}approve/", {"approve-comment": ""}, page)
    await asyncio.sleep(1.0)


async def resume(args: argparse.Namespace, targets: list[tuple[str, str, str]], cookies: dict[str, str]) -> None:
    """Click to resume: POST approve -> the first resumed event on the conversation's socket; with two
    targets (fanout.py --base) the clicks alternate between them, the first of each pair in turn."""
    webs = [
        (label, Web(base, cookies["requester"]), Web(base, cookies["approver"]), base, ws)
        for label, base, ws in targets
    ]
    for _label, requester, approver, _base, _ws in webs:
        await warm_up(requester, approver)
    profile = Profile(args.profile, "web-resume", args.web_pid) if args.profile else None
    rows: dict[str, list[dict[str, float]]] = {label: [] for label, *_ in webs}
    for i in range(args.resume + 1):
        for label, requester, approver, base, ws in webs[i % 2 :] + webs[: i % 2]:
            found = await _click(args, (requester, approver), base, ws, cookies, warm=i == 0, label=label)
            if found is not None:
                rows[label].append(found)
    if profile is not None:
        profile.stop()
    for _label, requester, approver, _base, _ws in webs:
        await requester.client.aclose()
        await approver.client.aclose()
    for label, done in rows.items():
        print(f"\nclick to resume (services mode, {len(done)} tickets, 1 socket each; {label}): ms, p50 / p95")
        for key in done[0] if done else []:
            values = [r[key] for r in done]
            target = "   target p50 <= 30, p95 <= 100" if key == "click to resume" else ""
            print(f"  {key:<34}{pct(values, 0.5):>8.1f}{pct(values, 0.95):>8.1f}{target}")
    print("  (stages from the Turn row's and the stored event's timestamps; one clock, one machine)")
    if len(rows) == 2 and all(rows.values()):
        (after, a), (before, b) = rows.items()
        print(f"\n{after} / {before}, same run, clicks alternating:")
        for key in ("POST -> turn claimed", "click to resume"):
            ratios = [pct([r[key] for r in a], q) / pct([r[key] for r in b], q) for q in (0.5, 0.95)]
            print(f"  {key:<34}p50 {ratios[0]:.2f}x  p95 {ratios[1]:.2f}x")
    if args.probe:
        args.probe.report()


async def _click(
    args: argparse.Namespace,
    people: tuple[Web, Web],
    base: str,
    ws: str,
    cookies: dict[str, str],
    warm: bool,
    label: str = "",
) -> dict[str, float] | None:
    """One click on a new conversation's ticket: its stages (None for a warm-up or a frame not seen)."""
    from asgiref.sync import sync_to_async

    from agents_app.models import StoredEvent, Turn
    from approvals.models import Response

    requester, approver = people
    session_pk, ticket_pk, last = await new_ticket(requester)
    sock = await Socket().open(f"{ws}/ws/sessions/{session_pk}/?after={last}", cookies["approver"], base)
    await settle([sock], quiet=0.5)
    page = f"/tickets/{ticket_pk}/"
    sent = time.perf_counter()
    sent_wall = time.time()
    await approver.post(f"{page}approve/", {"approve-comment": ""}, page)
    posted = time.perf_counter()
    got = (await wait_all([sock], EVENT_FRAME, sent, args.timeout))[0]
    await sock.close()
    if warm or got is None:
        return None  # the first is a warm-up
    if args.probe:
        await asyncio.sleep(0.05)  # the servers' lines written
        args.probe.sample(sent_wall, sent_wall + (got - sent), label)

    def stages() -> tuple[float, float, float] | None:
        turn = Response.objects.select_related("turn").get(pending_call_id=ticket_pk, final=True).turn
        first = StoredEvent.objects.filter(session_id=session_pk, turn=turn).order_by("id").first()
        t: Turn = turn
        if t.started_at is None or first is None:  # the frame came before these were read back
            return None
        return t.created_at.timestamp(), t.started_at.timestamp(), first.timestamp

    found = await sync_to_async(stages)()
    if found is None:
        print("  (a sample without its turn's start or first event: skipped)")
        return None
    _created, started, first_event = found
    return {
        "POST answered": (posted - sent) * 1000,
        "POST -> turn claimed": (started - sent_wall) * 1000,
        "claimed -> first event created": (first_event - started) * 1000,
        "first event -> frame received": (got - sent) * 1000 - (first_event - sent_wall) * 1000,
        "click to resume": (got - sent) * 1000,
    }
