"""The inbox's live fragments: a changed ticket's row rendered once, after commit, by the process that
changed it, and carried to every inbox socket with the facts a socket needs to place it: who may see
it, which filters it matches, whether it is open. An inbox socket then updates its rows, its total
and the navigation count without touching the database (issue 12; before, each socket ran four
queries and two renders per change). With no inbox socket open anywhere (`adkweb.live.groups_watched`)
nothing is rendered or sent: the change's facts are read (two queries) and swapped in all the same.

Counts move by the difference between a ticket's facts before and after the change. The facts last
published for each ticket are kept in Redis (in this process's memory in embedded mode) and swapped
atomically as the next change is published, so publishes that race still add up. When the previous
facts are unknown (the ticket changed before this was deployed, or Redis lost them), `before` is
null and the sockets count again from the database. A socket also counts again from the database
for what it receives in its first RECOUNT_SECONDS: its first count may already include a change
committed just before it and published just after. A search (`q`) is still matched by the database
(it searches PostgreSQL's text of the arguments).

Visibility mirrors `approvals.permissions.visible_q`, with the viewer's roles and groups read when
the socket connects and again on its re-check timer (adkweb.live_rights: a changed role or team closes
the socket, which reconnects under the new one; none left, it stays closed).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.db import connection
from django.template.loader import render_to_string

from adkweb.live import acommand_soon, group_send, groups_watched
from adkweb.raw_rows import raw
from adkweb.roles import is_approver, is_observer

from .inbox_due import pushed_row, row_due
from .models import PendingCall
from .permissions import escalation_reached, escalation_time

logger = logging.getLogger(__name__)

APPROVALS_GROUP = "approvals"
LIVE = "approvals/partials/live.html"
FACTS_TTL = 30 * 24 * 3600  # seconds a ticket's last published facts are kept
STATUSES = frozenset(PendingCall.Status.values)  # Django builds the list anew on each `.values`
CLOSED = frozenset(s for s in STATUSES if s not in PendingCall.OPEN_STATUSES)
RECOUNT_SECONDS = 1.0
NEW = {"exists": False}  # the facts "before" a ticket that was just opened


def ticket_facts(
    ticket: PendingCall, approver_groups: list[int], escalation_groups: list[int], responders: list[int]
) -> dict:
    return {
        "exists": True,
        "status": ticket.status,
        "open": ticket.is_open,
        "app_name": ticket.app_name,
        "tool_name": ticket.tool_name,
        "kind": ticket.kind,
        "requester": ticket.requester,
        "routed": ticket.routed,
        "groups": approver_groups,
        "escalated": ticket.escalated_at is not None,
        "escalates_at": escalates_at.timestamp() if (escalates_at := escalation_time(ticket)) else None,
        "escalation_groups": escalation_groups,
        "assigned_to": ticket.assigned_to_id,
        "closed_by": ticket.closed_by_id,
        "responders": responders,
    }


def _escalated(facts: dict) -> bool:
    """Open to its escalation groups (approvals.permissions.escalation_reached): by the clock, when a socket asks."""
    return escalation_reached(bool(facts["escalated"]), facts.get("escalates_at"), time.time())


@dataclass(frozen=True)
class Viewer:
    """What visibility needs of a person, read once when their socket connects."""

    pk: int
    username: str
    sees_all: bool
    approver: bool
    groups: frozenset[int]

    @classmethod
    def of(cls, user: Any) -> Viewer:
        return cls(
            pk=user.pk,
            username=user.get_username(),
            sees_all=bool(user.is_superuser or is_observer(user)),
            approver=is_approver(user),
            groups=frozenset(user.groups.values_list("pk", flat=True)),
        )

    def sees(self, facts: dict) -> bool:
        if not facts.get("exists"):
            return False
        if self.sees_all or facts["requester"] == self.username:
            return True
        if self.approver and not facts["routed"]:
            return True
        if self.groups.intersection(facts["groups"]):
            return True
        return bool(_escalated(facts) and self.groups.intersection(facts["escalation_groups"]))


def matches(facts: dict, filters: Any, viewer: Viewer) -> bool | None:
    """Whether the ticket is in this inbox view (visible and matching); None if only the database
    can tell (a search)."""
    if filters.q:
        return None
    if not viewer.sees(facts):
        return False
    status = filters.status
    if status == "closed":
        ok = facts["status"] in CLOSED
    elif status == "all":
        ok = True
    elif status in STATUSES:
        ok = facts["status"] == status
    else:
        ok = facts["open"]
    if filters.agent and facts["app_name"] != filters.agent:
        ok = False
    if filters.tool and facts["tool_name"] != filters.tool:
        ok = False
    if filters.kind and facts["kind"] != filters.kind:
        ok = False
    if filters.mine and viewer.pk not in (facts["assigned_to"], facts["closed_by"], *facts["responders"]):
        ok = False
    return ok


def counts_open(facts: dict, viewer: Viewer) -> bool:
    return bool(facts.get("exists") and facts["open"] and viewer.sees(facts))


@lru_cache(maxsize=512)
def nav_count_html(count: int) -> str:
    return render_to_string(LIVE + "#nav-count", {"count": count, "oob": True})


@lru_cache(maxsize=512)
def total_html(total: int) -> str:
    return render_to_string("approvals/inbox.html#total", {"total": total, "oob": True})


# -- the facts last published, per ticket -----------------------------------------------------------
_memory: dict[str, str] = {}
_memory_lock = threading.Lock()
_redis: Any = None


def _swap(key: str, facts: dict) -> dict | None:
    """Store these facts as the ticket's last published; return the ones they replace (None: unknown)."""
    value = json.dumps(facts)
    if not settings.REDIS_URL:
        with _memory_lock:
            old = _memory.get(key)
            _memory[key] = value
    else:
        global _redis
        if _redis is None:
            import redis

            _redis = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5)
        old = _redis.set(key, value, ex=FACTS_TTL, get=True)
    return None if old is None else json.loads(old)


def _tables() -> tuple[str, str, str, str]:
    from .models import Response

    return (
        PendingCall._meta.db_table,
        PendingCall.approver_groups.through._meta.db_table,
        PendingCall.escalation_groups.through._meta.db_table,
        Response._meta.db_table,
    )


TICKETS, APPROVER_GROUPS, ESCALATION_GROUPS, RESPONSES = _tables()
# What ticket_facts reads of the ticket row, when no row is rendered (plain SQL: no ORM compiling).
FACTS_ROW = (
    "SELECT id, status, app_name, tool_name, kind, requester, routed, escalate_at, escalated_at, assigned_to_id, "
    f"closed_at, closed_by_id, created_at FROM {TICKETS} WHERE id = %s"
)
# Its approver and escalation groups and the people who answered it, tagged 1, 2, 3.
FACTS_IDS = (
    f"SELECT 1, group_id FROM {APPROVER_GROUPS} WHERE pendingcall_id = %s "
    f"UNION ALL SELECT 2, group_id FROM {ESCALATION_GROUPS} WHERE pendingcall_id = %s "
    f"UNION ALL SELECT 3, actor_id FROM {RESPONSES} WHERE pending_call_id = %s AND actor_id IS NOT NULL"
)


def _facts(ticket: PendingCall) -> dict:
    """The ticket's facts: its row's fields, and its groups and responders read in one query."""
    found: dict[int, set[int]] = {1: set(), 2: set(), 3: set()}
    with connection.cursor() as cursor:
        cursor.execute(FACTS_IDS, [ticket.pk] * 3)
        for tag, pk in cursor.fetchall():
            found[tag].add(pk)
    return ticket_facts(ticket, sorted(found[1]), sorted(found[2]), sorted(found[3]))


def publish_ticket(*, ticket_id: int, opened: bool = False, opened_as: PendingCall | None = None) -> None:
    """A ticket changed (`opened`: it was just created): its row and facts to every inbox socket.
    With no inbox socket open anywhere, only its facts are kept (swapped in as the last published):
    nothing is rendered or sent, and a socket that opens later counts from the database, then moves
    by the facts published after. `opened_as`: the ticket as its creator wrote it, with no groups
    (approvals.ticket_rider), whose facts are then taken from it rather than read."""
    from . import selectors

    if not groups_watched([APPROVALS_GROUP]):
        if opened_as is not None:
            _swap_quietly(opened_as, _opened_facts(opened_as))
            return
        bare = next(iter(raw(PendingCall, FACTS_ROW, [ticket_id])), None)
        if bare is not None:
            _swap_quietly(bare, _facts(bare))
        return
    ticket = selectors.ticket_get(ticket_id=ticket_id)
    if ticket is None:
        return
    selectors.approvals_attach([ticket])
    facts = _facts(ticket)
    before = _swap_quietly(ticket, facts)
    if before is None and opened:
        before = NEW
    message = {
        "type": "inbox.ticket",
        "ticket_id": ticket.pk,
        "facts": facts,
        "before": before,
        "due": row_due(ticket),  # read before the row: a due time reached as it renders is pushed again
        "row": pushed_row(ticket),
        "added": {
            edge: render_to_string(LIVE + "#rows-added", {"ticket": ticket, "edge": edge})
            for edge in ("afterbegin", "beforeend")
        },
    }
    group_send(APPROVALS_GROUP, message)


def _opened_facts(ticket: PendingCall) -> dict:
    """The facts of a ticket as approvals.ticket_rider opens it: no groups, no answers."""
    return ticket_facts(ticket, [], [], [])


async def apublish_opened_unwatched(ticket: PendingCall) -> None:
    """publish_ticket(opened_as=ticket) with no inbox socket open, from async code (the ticket rider's
    statement sent from the event loop): its facts kept as published, from the loop (no thread)."""
    facts = _opened_facts(ticket)
    try:
        if not settings.REDIS_URL:
            _swap(_key(ticket), facts)  # this process's memory: no I/O
            return
        # Written with the live batches, not waited for (the layer's Redis is REDIS_URL's); else awaited.
        if not await acommand_soon("SET", _key(ticket), json.dumps(facts), "EX", FACTS_TTL):
            await _aredis().set(_key(ticket), json.dumps(facts), ex=FACTS_TTL)
    except Exception:  # Redis is down: sockets count from the database
        logger.warning("Could not swap the published facts of ticket %s.", ticket.pk, exc_info=True)


# redis.asyncio's clients by event loop (a client's connections belong to the loop that opened them).
_aclients: dict[Any, Any] = {}


def _aredis() -> Any:
    loop = asyncio.get_running_loop()
    client = _aclients.get(loop)
    if client is None:
        for gone in [other for other in list(_aclients) if other.is_closed()]:
            _aclients.pop(gone, None)
        import redis.asyncio

        client = _aclients[loop] = redis.asyncio.Redis.from_url(settings.REDIS_URL, socket_timeout=5)
    return client


def _key(ticket: PendingCall) -> str:
    return f"adkweb:ticket-facts:{ticket.pk}:{ticket.created_at.timestamp()}"  # a reused id is another key


def _swap_quietly(ticket: PendingCall, facts: dict) -> dict | None:
    try:
        return _swap(_key(ticket), facts)
    except Exception:  # Redis is down: sockets count from the database
        logger.warning("Could not swap the published facts of ticket %s.", ticket.pk, exc_info=True)
        return None
