"""The enabled policies a new ticket is matched against, kept in this process per version of the
policy tables, and whether a standing grant could approve it: one query per ticket (PostgreSQL).

The version is a digest of the tables themselves, read in that query: every policy row (enabled or
not), their group links and the groups (whose names a ticket records with its rules). Any change,
by any process and any path (the policy pages, the API, the admin, a group renamed or deleted),
changes it, so the next ticket to open after the change commits is matched against the new rules;
nothing has to remember to invalidate anything. The same query says whether a live grant exists
for the ticket's agent, tool and kind in its conversation or for its requester: only then is
`grants.grant_matching` asked (which checks the rest). On SQLite (embedded mode) the enabled
candidates are read from the database for every ticket (no digest of the tables there) and the
grant question is the same SQL.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from .models import PendingCall, Policy, StandingGrant


def specificity(policy: Policy) -> tuple[int, ...]:
    has = (policy.condition.strip(), policy.tool, policy.kind, policy.agent)
    return (policy.priority, *(1 if x else 0 for x in has), -policy.pk)


def candidates(*, app_name: str, tool_name: str, kind: str) -> list[Policy]:
    """Enabled policies whose agent, tool and kind fit, best first (conditions not yet checked)."""
    qs = Policy.objects.filter(
        Q(agent="") | Q(agent=app_name), Q(tool="") | Q(tool=tool_name), Q(kind="") | Q(kind=kind), enabled=True
    ).prefetch_related("approver_groups", "escalation_groups")
    return sorted(qs, key=specificity, reverse=True)


def fits(policy: Policy, *, app_name: str, tool_name: str, kind: str) -> bool:
    """Whether the policy's agent, tool and kind fit (its condition aside)."""
    if policy.agent and policy.agent != app_name or policy.tool and policy.tool != tool_name:
        return False
    return not (policy.kind and policy.kind != kind)


_cached: tuple[tuple[str, ...], list[Policy]] | None = None  # (version, enabled policies best first)


def _digest(table: str) -> str:
    return f"(SELECT md5(COALESCE(string_agg(t::text, '|' ORDER BY t::text), '')) FROM {table} t)"


# The version of the policy tables: one digest per table (a row of them in SQL).
VERSION = ", ".join(
    _digest(model._meta.db_table)
    for model in (
        Policy,
        Policy.approver_groups.through,
        Policy.escalation_groups.through,
        Group,
    )
)
GRANT_POSSIBLE = (
    f"EXISTS (SELECT 1 FROM {StandingGrant._meta.db_table} g WHERE g.app_name = %s AND g.tool_name = %s "
    "AND g.kind = %s AND g.revoked_at IS NULL AND g.expires_at > %s "
    "AND ((g.scope = 'session' AND g.session_id = %s) OR (g.scope = 'user' AND g.requester = %s)))"
)
VERSION_AND_GRANT = f"SELECT {VERSION}, {GRANT_POSSIBLE}"


def cached() -> tuple[tuple[str, ...], list[Policy]] | None:
    """(the version last read, the enabled policies then, best first), or None before the first
    ticket: a caller that checks the version in its own statement (approvals.ticket_rider) may use
    them."""
    return _cached


def _load() -> list[Policy]:
    enabled = Policy.objects.filter(enabled=True).prefetch_related("approver_groups", "escalation_groups")
    return sorted(enabled, key=specificity, reverse=True)


def policies_and_grant(ticket: PendingCall) -> tuple[list[Policy], bool]:
    """(the enabled policies that may apply to this ticket, best first, conditions not yet checked;
    whether a standing grant may approve it)."""
    global _cached
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    params: list[Any] = [ticket.app_name, ticket.tool_name, ticket.kind, now, ticket.session_id, ticket.requester]
    if connection.vendor != "postgresql":  # SQLite: the candidates from the database, the grant in SQL
        fitting = candidates(app_name=ticket.app_name, tool_name=ticket.tool_name, kind=ticket.kind)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {GRANT_POSSIBLE}", params)
            return fitting, bool(cursor.fetchone()[0])
    with connection.cursor() as cursor:
        cursor.execute(VERSION_AND_GRANT, params)
        *version, grant = cursor.fetchone()
    cached = _cached
    if cached is None or cached[0] != tuple(version):
        cached = (tuple(version), _load())
        _cached = cached  # another thread may have stored another version meanwhile: the next ticket checks
    fitting = [p for p in cached[1] if fits(p, app_name=ticket.app_name, tool_name=ticket.tool_name, kind=ticket.kind)]
    return fitting, bool(grant)
