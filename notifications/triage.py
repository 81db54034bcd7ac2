"""Inbox triage: bulk approve/reject (one confirmation, then a result per ticket) and saved views.
Plain forms first (they work without JavaScript); the keyboard script drives the same URLs."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from approvals.selectors import works_inbox

from . import bulk as bulk_services
from . import choices
from .forms import BulkForm, SavedViewForm, filters_query
from .models import SavedView

QUERY_MAX = SavedView._meta.get_field("query").max_length or 0


def _bulk_render(request: HttpRequest, partial: str, ctx: dict, status: int = 200) -> HttpResponse:
    template = "notifications/bulk.html" + (f"#{partial}" if request.htmx else "")  # type: ignore[attr-defined]
    return render(request, template, {**ctx, "partial": partial}, status=status)


@login_required
@require_POST
def bulk(request: HttpRequest) -> HttpResponse:
    """Step 1 shows how many and which tickets; step 2 (confirm) decides each and reports each."""
    if not works_inbox(request.user):  # then each ticket's own rules, as on its page (notifications.bulk)
        return _bulk_render(request, "error", {"error": "Only approvers decide tickets."}, status=403)
    form = BulkForm(request.POST)
    if not form.is_valid():
        return _bulk_render(
            request, "error", {"error": " ".join(str(e) for e in form.non_field_errors()) or "Bad request."}, 400
        )
    data = form.cleaned_data
    if not data["confirm"] or (data["action"] == "reject" and not data["reason"].strip()):
        tickets = bulk_services.tickets_for_bulk(ticket_ids=data["tickets"], user=request.user, action=data["action"])
        missing_reason = data["confirm"] and data["action"] == "reject"
        ctx = {"form": form, "action": data["action"], "tickets": tickets, "missing_reason": missing_reason}
        return _bulk_render(request, "confirm", ctx, status=400 if missing_reason else 200)
    results = bulk_services.tickets_decide(
        ticket_ids=data["tickets"], actor=request.user, action=data["action"], reason=data["reason"].strip()
    )
    held = sum(r.ok and r.held for r in results)  # approvals recorded on tickets that wait for more
    done = sum(r.ok and not r.held for r in results)
    ctx = {"results": results, "action": data["action"], "done": done, "held": held}
    return _bulk_render(request, "results", ctx)


@login_required
@require_POST
def view_save(request: HttpRequest) -> HttpResponse:
    """Save the inbox's current filters under a name (the same name replaces the old filters)."""
    if not works_inbox(request.user):
        return HttpResponse("Saved views are for approvers' inboxes.", status=403, content_type="text/plain")
    form = SavedViewForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Give the view a name (up to 40 characters); nothing was saved.")
        return redirect("/?" + (request.POST.get("query") or "").lstrip("?")[:QUERY_MAX])
    name, query = form.cleaned_data["name"].strip(), filters_query(form.filters())
    if len(query) > QUERY_MAX:  # percent-encoded, a search can outgrow the column (PostgreSQL: a 500)
        messages.error(request, f"These filters are too long to save as a view (over {QUERY_MAX} characters).")
        return redirect("/?" + query)
    try:
        choices.saved_view_save(user=request.user, name=name, query=query)
    except choices.TooManyViews as exc:
        messages.error(request, str(exc))
        return redirect("/?" + query)
    messages.success(request, f"Saved view “{name}”: it is in the menu bar.")
    return redirect("/?" + query)


@login_required
@require_POST
def view_delete(request: HttpRequest, view_id: int) -> HttpResponse:
    """Delete one of my saved views."""
    view = SavedView.objects.filter(pk=view_id, user_id=request.user.pk or 0).first()  # logged in: a pk
    if view is None:
        raise Http404("No such saved view.")
    view.delete()
    messages.success(request, f"Deleted the view “{view.name}”.")
    return redirect("notifications:preferences")
