"""Notification pages: preferences, one-tap approval links (confirm, then decide), "copy approval
link" on the ticket page, and resending a delivery. Thin: forms → services."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from adkweb.errors import Refused
from approvals import services as approvals
from approvals.forms import fits_schema
from approvals.selectors import approval_progress, can_decide, own_approval_counts, ticket_visible_get

from . import choices, links, selectors, services
from .emails import ticket_summary
from .forms import LinkConfirmForm, PreferencesForm
from .models import Delivery


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def preferences(request: HttpRequest) -> HttpResponse:
    """Email on/off and "only my groups", plus the saved inbox views."""
    prefs = selectors.preferences_for(request.user)
    initial = {
        "email": getattr(request.user, "email", ""),
        "email_enabled": prefs.email_enabled,
        "only_my_groups": prefs.only_my_groups,
    }
    form = PreferencesForm(request.POST if request.method == "POST" else None, initial=initial)
    if form.is_bound and form.is_valid():
        choices.preferences_update(user=request.user, **form.cleaned_data)
        messages.success(request, "Notification settings saved.")
        return redirect("notifications:preferences")
    ctx = {"form": form, "views": selectors.saved_views_for(request.user)}
    return render(request, "notifications/preferences.html", ctx, status=400 if form.is_bound else 200)


def _link_page(
    request: HttpRequest, checked: links.CheckedLink, form: LinkConfirmForm, status: int = 200
) -> HttpResponse:
    ctx = {"link": checked.link, "action": checked.action, "ticket": ticket_summary(checked.ticket), "form": form}
    return render(request, "notifications/approval_link.html", ctx, status=status)


def _refused(request: HttpRequest, exc: links.LinkRefused, detail: str = "") -> HttpResponse:
    ctx: dict[str, Any] = {"reason": exc.reason, "link": exc.link, "detail": detail, "tally": exc.tally}
    if exc.link is not None and exc.reason not in ("tampered", "wrong_person"):
        ctx["ticket"] = exc.link.ticket
    return render(request, "notifications/approval_link_refused.html", ctx, status=exc.status)


@require_http_methods(["GET", "HEAD", "POST"])
def approval_link(request: HttpRequest, token: str) -> HttpResponse:
    """A one-tap link: GET shows the ticket and one big button (it never decides); POST decides, once."""
    try:
        checked = links.link_check(token=token, viewer=request.user)
    except links.LinkRefused as exc:
        return _refused(request, exc)
    form = LinkConfirmForm(request.POST if request.method == "POST" else None, action=checked.action)
    if not form.is_bound:
        return _link_page(request, checked, form)
    if not form.is_valid():
        return _link_page(request, checked, form, status=400)
    try:
        response = links.link_use(token=token, viewer=request.user, reason=form.cleaned_data["reason"])
    except links.LinkRefused as exc:
        return _refused(request, exc)
    except approvals.TicketClosed as exc:
        return _refused(request, links.LinkRefused("closed", checked.link), detail=str(exc))
    except Refused as exc:  # the ticket's rules refused this answer: say why on the same page
        form.add_error(None, exc.detail)
        return _link_page(request, checked, form, status=exc.status)
    ctx = {
        "action": checked.action,
        "ticket": ticket_summary(checked.ticket),
        "link": checked.link,
        "progress": approval_progress(response),  # "1 of 2 approvals recorded": not approved yet
    }
    return render(request, "notifications/approval_link_done.html", ctx)


@login_required
@require_POST
def ticket_link(request: HttpRequest, ticket_id: int) -> HttpResponse:
    """ "Copy approval link": a fresh one-tap link pair for the person asking (only for themselves)."""
    ticket = ticket_visible_get(user=request.user, ticket_id=ticket_id)
    if ticket is None:
        raise Http404("No such ticket, or it is not yours to see.")
    error, status = "", 200
    ctx: dict[str, Any] = {"ticket": ticket, "link": None, "approve_url": "", "reject_url": ""}
    if not can_decide(request.user, ticket):
        error, status = "Only someone who may decide this ticket can get an approval link for it.", 403
    elif ticket.is_closed:
        error, status = f"Ticket #{ticket.pk} is already {ticket.get_status_display()}: no link needed.", 409
    elif (tally := own_approval_counts(request.user, ticket)) is not None:
        error = (
            f"Your approval of ticket #{ticket.pk} is recorded: {tally.counted} of {tally.required}, "
            f"{tally.more} more needed from another approver. No link needed; you may still reject it here."
        )
        status = 409
    elif not fits_schema(ticket, approvals.approve_payload(ticket)):
        error, status = "This ticket needs an answer that fits its form; a one-tap link cannot give one.", 400
    else:
        try:
            link = links.link_create(ticket=ticket, user=request.user)
        except Refused as exc:  # past its due time (a page loaded before it): no link born expired
            error, status = exc.detail, exc.status
        else:
            ctx |= {
                "link": link,
                "approve_url": links.link_url(link, "approve"),
                "reject_url": links.link_url(link, "reject"),
            }
    ctx["error"] = error
    template = "notifications/ticket_link.html" + ("#result" if request.htmx else "")  # type: ignore[attr-defined]
    return render(request, template, ctx, status=status)


@login_required
@require_POST
def delivery_resend(request: HttpRequest, delivery_id: int) -> HttpResponse:
    """Resend one email or webhook delivery (admins: the change-delivery permission)."""
    delivery = Delivery.objects.filter(pk=delivery_id).first()
    if delivery is None:
        raise Http404("No such delivery.")
    if not request.user.has_perm("notifications.change_delivery"):
        return HttpResponse("Only admins resend deliveries.", status=403, content_type="text/plain")
    services.delivery_resend(delivery=delivery)
    notice = f"Resending {delivery.channel} to {selectors.delivery_target_label(delivery)}."
    if delivery.ticket_id is None:
        return HttpResponse(notice, content_type="text/plain")
    messages.success(request, notice)
    return redirect(reverse("approvals:ticket", args=[delivery.ticket_id]) + "#ticket-status")
