"""Approvals pages: the inbox and the ticket page with its four actions (thin: forms → services)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import connection
from django.db.models import ForeignKey, QuerySet
from django.forms import Form
from django.http import Http404, HttpRequest, HttpResponse
from django.middleware.csrf import get_token
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST, require_safe

from adkweb import compiled, roles
from adkweb.errors import Invalid, Refused
from adkweb.http import HtmxHttpRequest
from agents_app import selectors as conversations
from agents_app.models import AdkSession

from . import events, forms, selectors, services
from .decision_plan import NotAllowed, unsent
from .models import PendingCall, Response
from .permissions import can_view_ticket, decide_refusal, works_inbox
from .ticket_page import PAGE_HEADER, _approve_form, microseconds, page_key, page_token, ticket_context


# -- inbox --------------------------------------------------------------------------------------
@login_required
@require_safe
def inbox(request: HtmxHttpRequest) -> HttpResponse:
    """Open tickets for approvers; one view serves the page and its results fragment."""
    if not works_inbox(request.user):
        messages.info(request, "The approvals inbox is for approvers; here are your conversations.")
        return redirect("/sessions/")
    form = forms.InboxFilterForm(request.GET)
    filters = form.filters()
    template = "approvals/inbox.html"
    if request.htmx and request.htmx.target == "inbox-results":
        template += "#results"
    rendered = timezone.now()  # before the rows are read: a change after it may be in them or not
    page = selectors.inbox_page(filters=filters, user=request.user)
    if selectors.counts_open_tickets(filters):  # the nav badge's count is this one: no second query
        request.open_ticket_count = page.total  # type: ignore[attr-defined]  # read by context_processors.nav
    context = {
        "form": form,
        "filters": filters,
        "page": page,
        "total": page.total,
        "choices": selectors.inbox_filter_choices(filters=filters),
        "ws_query": request.GET.urlencode(),
        "changed": microseconds(rendered),  # its socket pushes the rows changed since (approvals.consumers)
    }
    return render(request, template, context)


# -- ticket -------------------------------------------------------------------------------------
def _visible_call(request: HttpRequest, ticket_id: int) -> PendingCall:
    ticket = selectors.ticket_get(ticket_id=ticket_id)
    if ticket is None or not can_view_ticket(request.user, ticket):
        raise Http404("No such ticket, or it is not yours to see.")
    return ticket


@login_required
@require_safe
def ticket_detail(request: HtmxHttpRequest, ticket_id: int) -> HttpResponse:
    ticket = _visible_call(request, ticket_id)
    # The socket catches up from this pk: read it before the timeline (a duplicate beats a gap).
    after = conversations.last_event_pk(session_pk=ticket.session_id)
    ctx = ticket_context(ticket, request.user, last_event_pk=after, page_token=page_token())
    ctx["timeline"] = selectors.ticket_timeline(ticket=ticket) if ctx["conversation_visible"] else []
    return render(request, "approvals/ticket.html", ctx)


def _seen(data: dict) -> str | None:
    return data.get("args_hash") or None


def _approve(ticket: PendingCall, user: Any, data: dict) -> Response:
    return services.ticket_approve(
        ticket=ticket,
        actor=user,
        comment=data["comment"],
        payload=data.get("payload"),
        args_hash=_seen(data),
        edited_args=data.get("edited_args"),
        grant=data.get("grant"),
    )


def _reject(ticket: PendingCall, user: Any, data: dict) -> Response:
    return services.ticket_reject(ticket=ticket, actor=user, reason=data["reason"], args_hash=_seen(data))


def _update(ticket: PendingCall, user: Any, data: dict) -> Response:
    return services.ticket_update(
        ticket=ticket, actor=user, message=data["message"], progress=data.get("progress"), extra=data.get("extra")
    )


def _respond(ticket: PendingCall, user: Any, data: dict) -> Response:
    payload = data["payload"] if "payload" in data else data["body"]
    return services.response_submit(
        ticket=ticket, actor=user, payload=payload, final=data["final"], comment=data["comment"], args_hash=_seen(data)
    )


ACTIONS: dict[str, tuple[Callable[[PendingCall, Any], Form], Callable[[PendingCall, Any, dict], Response], str]] = {
    "approve": (_approve_form, _approve, "Approved"),
    "reject": (lambda c, d: forms.RejectForm(d, prefix="reject"), _reject, "Rejected"),
    "update": (lambda c, d: forms.UpdateForm(d, prefix="update"), _update, "Update sent"),
    "custom": (lambda c, d: forms.response_form_for(c, d), _respond, "Response sent"),
}


def _form_data(form: Form) -> dict:
    data = dict(form.cleaned_data)
    if isinstance(form, forms.SchemaResponseForm):
        data["payload"] = form.payload()
    if isinstance(form, forms.ApproveForm):
        data.update(edited_args=form.edited_args(), grant=form.grant())
    return data


def _ticket_columns() -> list[str]:
    return [f.attname for f in PendingCall._meta.concrete_fields]


def _session_columns() -> list[str]:
    return [f.attname for f in AdkSession._meta.concrete_fields]


def _ticket_with_session(ticket_id: int) -> QuerySet:
    columns = _ticket_columns() + [f"session__{name}" for name in _session_columns()]
    return PendingCall.objects.filter(pk=ticket_id).order_by().values_list(*columns)


def _acted_on(request: HttpRequest, ticket_id: int) -> PendingCall:
    """`_visible_call` for an action (before its decision: the click's critical path): the ticket and
    its conversation's row in one statement compiled once per process, in the round trip that reads
    the person's permissions (which the visibility and decision checks ask next); the other related
    rows are read if the answer shows them."""
    permissions = roles.permissions_read(request.user)
    perms, found = compiled.rows_after(permissions, "ticket_act_ticket", (), _ticket_with_session, ticket_id)
    if permissions is not None:
        roles.permissions_loaded(request.user, perms)
    if not found:
        raise Http404("No such ticket, or it is not yours to see.")
    n = len(_ticket_columns())
    ticket = PendingCall.from_db(connection.alias, _ticket_columns(), found[0][:n])
    session = AdkSession.from_db(connection.alias, _session_columns(), found[0][n:])
    cast(ForeignKey, PendingCall._meta.get_field("session")).set_cached_value(ticket, session)
    if not can_view_ticket(request.user, ticket):
        raise Http404("No such ticket, or it is not yours to see.")
    return ticket


@login_required
@require_POST
def ticket_act(request: HtmxHttpRequest, ticket_id: int, action: str) -> HttpResponse:
    """Approve, reject, send an update or a custom response; errors say why and send nothing."""
    ticket = _acted_on(request, ticket_id)
    if action not in ACTIONS:
        raise Http404("No such action.")
    make_form, perform, done = ACTIONS[action]
    refusal = decide_refusal(request.user, ticket)
    if refusal:
        return _ticket_reply(request, ticket, status=403, error=str(unsent(NotAllowed.answering(ticket, refusal))))
    form = make_form(ticket, request.POST)
    if not form.is_valid():
        return _ticket_reply(
            request, ticket, status=400, error="Please fix the form below; nothing was sent.", bound={action: form}
        )
    try:
        with events.on_page(page_key(request.user, request.headers.get(PAGE_HEADER)) if request.htmx else None):
            response = perform(ticket, request.user, _form_data(form))
    except Invalid as exc:  # the form stays as it was sent, to fix
        return _ticket_reply(request, ticket, status=exc.status, error=str(exc), bound={action: form})
    except Refused as exc:
        return _ticket_reply(request, ticket, status=exc.status, error=str(exc))
    if not request.htmx:
        messages.success(request, _done_notice(_decided(ticket, response), response, done))
        return redirect(reverse("approvals:ticket", args=[ticket.pk]))
    ticket = _decided(ticket, response)
    return _ticket_reply(request, ticket, status=200, notice=_done_notice(ticket, response, done), fresh=True)


_RELATED = ("session", "closed_by", "assigned_to", "edited_by", "policy")  # selectors.ticket_get's


def _decided(seen: PendingCall, response: Response) -> PendingCall:
    """The ticket as the decision left it: the row its transaction locked and saved (no read after
    commit), with the related rows the view's first read brought where they are still the same rows
    (the conversation's row stays the one read first: the panel shows nothing of it that a decision
    changes)."""
    ticket = response.pending_call
    for name in _RELATED:
        field = cast(ForeignKey, PendingCall._meta.get_field(name))
        same = getattr(seen, field.attname) == getattr(ticket, field.attname)
        if same and field.is_cached(seen) and not field.is_cached(ticket):
            field.set_cached_value(ticket, field.get_cached_value(seen))
    return ticket


def _done_notice(ticket: PendingCall, response: Response, done: str) -> str:
    if ticket.is_open and response.action == Response.Action.APPROVE and not response.final:  # held: a custom one too
        count = len(selectors.ticket_approvals(ticket=ticket))
        return (
            f"Your approval is recorded: {count} of {ticket.required_approvals} approvals. "
            "It reaches the agent with the last one."
        )
    return f"{done}. The agent is resuming; its next steps appear below."


@login_required
@require_POST
def ticket_assign(request: HtmxHttpRequest, ticket_id: int) -> HttpResponse:
    """Assign to me / Unassign: approvers say who is on a ticket."""
    ticket = _visible_call(request, ticket_id)
    take = request.POST.get("assign") == "me"
    try:
        services.ticket_assign(ticket=ticket, actor=request.user, assignee=request.user if take else None)
    except Refused as exc:
        return _ticket_reply(request, ticket, status=exc.status, error=str(exc))
    notice = "Assigned to you." if take else "Unassigned."
    if not request.htmx:
        messages.success(request, notice)
        return redirect(reverse("approvals:ticket", args=[ticket.pk]))
    return _ticket_reply(request, ticket, status=200, notice=notice)


def _ticket_reply(
    request: HtmxHttpRequest,
    ticket: PendingCall,
    *,
    status: int,
    bound: dict | None = None,
    fresh: bool = False,
    **extra: Any,
) -> HttpResponse:
    if not fresh:
        ticket = selectors.ticket_get(ticket_id=ticket.pk) or ticket
    ctx = ticket_context(ticket, request.user, bound, **extra)
    if request.htmx:  # the panel, and the arguments out of band (an approval may have edited them)
        # Rendered from the context alone, as the ticket socket renders them: the partials show
        # nothing of the page's context processors (the nav's open-ticket count, saved views), so
        # they are not computed; the forms' CSRF token is the one thing the request gives.
        ctx.update(csrf_token=get_token(request), request=request)
        args = render_to_string("approvals/ticket.html#args", {**ctx, "oob": True})
        page = page_key(request.user, request.headers.get(PAGE_HEADER))
        if page is not None and not fresh:  # fresh: a decision, whose ticket.changed names the page (on_page)
            events.notify_page_shows(
                ticket_id=ticket.pk, session_pk=ticket.session_id, page=page, shows=ctx["actions_shown"]
            )
        return HttpResponse(render_to_string("approvals/ticket.html#panel", ctx) + args, status=status)
    ctx.update(last_event_pk=conversations.last_event_pk(session_pk=ticket.session_id), page_token=page_token())
    ctx["timeline"] = selectors.ticket_timeline(ticket=ticket) if ctx["conversation_visible"] else []
    return render(request, "approvals/ticket.html", ctx, status=status)
