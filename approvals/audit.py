"""The audit trail's reads: every decision (Response), newest first, filtered by agent, tool,
person, outcome and period; its exports stream in chunks so 100k rows keep memory flat."""

from __future__ import annotations

import csv
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django import forms
from django.core.paginator import Page, Paginator
from django.db.models import JSONField, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from adkweb.api import iso

from .models import Response

PAGE_SIZE = 50
CHUNK = 2000


class AuditFilterForm(forms.Form):
    agent = forms.CharField(required=False, max_length=128)
    tool = forms.CharField(required=False, max_length=128)
    person = forms.CharField(required=False, max_length=150, help_text="Username or display name.")
    outcome = forms.ChoiceField(required=False, choices=[("", "any outcome"), *Response.Action.choices])
    since = forms.DateField(required=False, label="From", widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, label="To", widget=forms.DateInput(attrs={"type": "date"}))
    page = forms.IntegerField(required=False, min_value=1, max_value=10**9)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        since, until = data.get("since"), data.get("until")
        if since and until and since > until:
            raise forms.ValidationError("The period ends before it starts.")
        return data


@dataclass(frozen=True)
class AuditFilters:
    agent: str = ""
    tool: str = ""
    person: str = ""
    outcome: str = ""
    since: date | None = None
    until: date | None = None  # inclusive: the whole day
    page: int = 1

    @classmethod
    def from_form(cls, form: AuditFilterForm) -> AuditFilters:
        data = form.cleaned_data
        return cls(
            agent=(data.get("agent") or "").strip(),
            tool=(data.get("tool") or "").strip(),
            person=(data.get("person") or "").strip(),
            outcome=data.get("outcome") or "",
            since=data.get("since"),
            until=data.get("until"),
            page=data.get("page") or 1,
        )


def _day_start(day: date, *, days_after: int = 0) -> datetime | None:
    """The first instant (in the current time zone) of `day` or of a day after it, in UTC; None when it is
    past the datetimes Python and the databases hold: the day after 9999-12-31, or 0001-01-01 where its
    midnight is still year 0 in UTC (east of it). A period reaching there has no bound on that side (its
    OverflowError was a 500 on the audit page and its exports)."""
    try:
        start = datetime.combine(day + timedelta(days=days_after), time.min)
        return timezone.make_aware(start).astimezone(UTC)
    except OverflowError:
        return None


def decisions(filters: AuditFilters, scope: Q) -> QuerySet[Response]:
    """Every decision matching the filters within the viewer's scope (`permissions.audit_scope_q`),
    newest first (archived conversations' too)."""
    qs = Response.objects.filter(scope)
    if filters.agent:
        qs = qs.filter(pending_call__app_name=filters.agent)
    if filters.tool:
        qs = qs.filter(Q(pending_call__tool_name=filters.tool) | Q(pending_call__call_name=filters.tool))
    if filters.person:
        qs = qs.filter(Q(actor_username__iexact=filters.person) | Q(actor_name__icontains=filters.person))
    if filters.outcome:
        qs = qs.filter(action=filters.outcome)
    since = _day_start(filters.since) if filters.since else None
    if since is not None:
        qs = qs.filter(created_at__gte=since)
    until = _day_start(filters.until, days_after=1) if filters.until else None
    if until is not None:
        qs = qs.filter(created_at__lt=until)
    return qs.order_by("-id")


CLOSED_WITH = "closed_with"  # on an audit page's decision: its ticket's closing record (Response.counted)


def audit_page(filters: AuditFilters, scope: Q) -> Page:
    """A page of decisions, each with its ticket's closing record, read in the same query: a held approval
    says whether it counted when its ticket closed (`approval_counted`)."""
    closing = Response.objects.filter(pending_call=OuterRef("pending_call"), final=True).order_by()
    qs = decisions(filters, scope).select_related("pending_call__session", "grant__created_by")
    qs = qs.annotate(**{CLOSED_WITH: Subquery(closing.values("counted")[:1], output_field=JSONField())})
    return Paginator(qs, PAGE_SIZE).get_page(filters.page)


def approval_counted(response: Response) -> bool | None:
    """Whether a held approval on an audit page counted when its ticket closed: None while the ticket is
    open, and where its close recorded nothing (before the record was kept; cancelled)."""
    record = getattr(response, CLOSED_WITH, None)
    if not response.is_pending_approval or response.pending_call.is_open or record is None:
        return None
    return response.pk in record


def filter_choices(filters: AuditFilters) -> dict[str, list[str]]:
    """The inbox's menus (from the agents' configuration: no scan of the decisions), plus agents
    since deleted (their configuration history keeps their names)."""
    from agents_app.models import AgentConfigVersion

    from .selectors import InboxFilters, inbox_filter_choices

    choices = inbox_filter_choices(filters=InboxFilters(agent=filters.agent, tool=filters.tool))
    gone = AgentConfigVersion.objects.order_by().values_list("agent_name", flat=True).distinct()
    choices["agents"] = sorted(set(choices["agents"]) | set(gone))
    return choices


# -- exports -------------------------------------------------------------------------------------
EXPORT_FIELDS = {  # column -> the ORM path it reads
    "id": "id",
    "chain_seq": "chain_seq",
    "chain_hash": "chain_hash",
    "created_at": "created_at",
    "ticket": "pending_call_id",
    "agent": "pending_call__app_name",
    "tool": "pending_call__tool_name",
    "kind": "pending_call__kind",
    "requester": "pending_call__requester",
    "session_id": "pending_call__session__session_id",
    "conversation_archived_at": "pending_call__session__archived_at",
    "decided_by": "actor_username",
    "decided_by_name": "actor_name",
    "source": "source",
    "action": "action",
    "final": "final",
    "comment": "comment",
    "args_hash": "args_hash",
    "payload": "payload",
    "edited_args": "edited_args",
    "counted": "counted",  # the decision that closed a quorum ticket: its held approvals that counted then
}


def _export_row(values: dict[str, Any]) -> dict[str, Any]:
    row = {column: values[path] for column, path in EXPORT_FIELDS.items()}
    for key in ("created_at", "conversation_archived_at"):
        row[key] = iso(row[key])
    return row


async def export_rows(filters: AuditFilters, scope: Q) -> AsyncIterator[dict[str, Any]]:
    """Matching decisions as plain dicts, fetched CHUNK rows at a time (a server-side cursor on
    PostgreSQL): memory stays flat however many rows there are. (`values()`, not `values_list()`:
    Django's values_list iterable runs its query when created, in the event loop's thread.)"""
    qs = decisions(filters, scope).values(*EXPORT_FIELDS.values())
    async for values in qs.aiterator(chunk_size=CHUNK):
        yield _export_row(values)


async def jsonl_lines(rows: AsyncIterator[dict[str, Any]]) -> AsyncIterator[str]:
    async for row in rows:
        yield json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n"


class _Line:
    """csv.writer's file: hands back what it was given."""

    def write(self, value: str) -> str:
        return value


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> str:
    """A cell a spreadsheet shows as text: JSON for objects, and a leading ' before anything a
    spreadsheet would run as a formula (CSV injection)."""
    if value is None:
        return ""
    if isinstance(value, dict | list):
        value = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    text = str(value)
    return "'" + text if text.startswith(FORMULA_START) else text


async def csv_lines(rows: AsyncIterator[dict[str, Any]]) -> AsyncIterator[str]:
    writer = csv.writer(_Line())
    yield writer.writerow(list(EXPORT_FIELDS))
    async for row in rows:
        yield writer.writerow([csv_cell(v) for v in row.values()])
