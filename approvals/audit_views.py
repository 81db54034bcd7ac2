"""The audit page (approvers, staff observers, agent admins; not requesters): every decision with
filters, linking to its ticket and conversation, and its CSV and JSON Lines exports (streamed)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, QueryDict, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_safe

from adkweb.errors import Forbidden, Invalid

from . import audit
from .permissions import audit_scope_q, may_audit


def _filters(user: Any, params: QueryDict) -> tuple[audit.AuditFilterForm, audit.AuditFilters]:
    if not may_audit(user):
        raise Forbidden("The audit trail is for approvers, staff observers and agent admins.")
    form = audit.AuditFilterForm(params)
    if not form.is_valid():
        problems = "; ".join(
            f"{'' if k == '__all__' else k + ': '}{' '.join(str(e) for e in v)}" for k, v in form.errors.items()
        )
        raise Invalid(f"Bad filter: {problems}")
    return form, audit.AuditFilters.from_form(form)


@login_required
@require_safe
def audit_list(request: HttpRequest) -> HttpResponse:
    form, filters = _filters(request.user, request.GET)
    page = audit.audit_page(filters, audit_scope_q(request.user))
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "form": form,
        "filters": filters,
        "page": page,
        "choices": audit.filter_choices(filters),
        "query": query.urlencode(),
        "outcomes": audit.Response.Action.choices,
    }
    return render(request, "approvals/audit.html", context)


@login_required
@require_safe
def audit_export(request: HttpRequest, fmt: str) -> StreamingHttpResponse:
    return export_response(request.user, request.GET, fmt)


def export_response(user: Any, params: QueryDict, fmt: str) -> StreamingHttpResponse:
    """CSV or JSON Lines of every matching decision the user may audit, streamed as it is read (the
    page's export links, and the API's `/api/audit/decisions.csv|jsonl` for token clients)."""
    _, filters = _filters(user, params)
    rows = audit.export_rows(filters, audit_scope_q(user))
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    if fmt == "csv":
        response = StreamingHttpResponse(audit.csv_lines(rows), content_type="text/csv; charset=utf-8")
    else:
        response = StreamingHttpResponse(audit.jsonl_lines(rows), content_type="application/x-ndjson; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="adkweb-decisions-{stamp}.{fmt}"'
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "no-store"
    return response
