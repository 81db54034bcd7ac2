"""Conversation and agent pages: parse, call one selector or service, render."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from adkweb.errors import Refused
from adkweb.http import HtmxHttpRequest, number
from adkweb.roles import can_retry_turns, is_agent_admin

from . import agent_cards, agents, selectors, services, visibility
from .forms import MessageForm, NewConversationForm, SessionFilterForm
from .models import AdkSession, Turn
from .rows import rows_seen


def _visible_session(request: HttpRequest, pk: int) -> AdkSession:
    session = get_object_or_404(AdkSession, pk=pk)
    if not visibility.session_visible(request.user, session):
        raise Http404("No such conversation.")  # do not reveal that it exists
    return session


def _is_owner(request: HttpRequest, session: AdkSession) -> bool:
    return session.user_id == request.user.get_username()


@login_required
@require_safe
def session_list(request: HtmxHttpRequest) -> HttpResponse:
    agents = selectors.session_list_agents(user=request.user, chosen=request.GET.get("agent", ""))
    form = SessionFilterForm(request.GET, agents=agents)
    filters = form.filters()
    cursors = {k: request.GET.get(k, "")[:64] for k in ("after", "before")}  # the pager's keyset (adkweb.paging)
    page = selectors.session_page(user=request.user, page=request.GET.get("page"), **cursors, **filters)
    query = {"agent": filters["app_name"], "status": filters["status"]}
    template = "agents_app/session_list.html" + ("#session-list" if request.htmx else "")
    context = {"form": form, "page": page, "query": query, "seen": rows_seen(page)}
    return render(request, template, context)


def _detail_context(request: HttpRequest, session: AdkSession, form: MessageForm, sent: bool = False) -> dict:
    timeline = selectors.session_timeline(session)
    last_pk = max((e.pk for e in timeline if getattr(e, "pk", None)), default=0)
    return {
        "session": session,
        "timeline": timeline,
        "last_event_pk": last_pk,
        "form": form,
        "sent": sent,
        "status": session.status or "idle",  # read with the session just now (selectors.session_status)
        "is_owner": _is_owner(request, session),
        "can_retry": can_retry_turns(request.user, session),
        "artifacts": selectors.session_artifacts(session=session),
        "config_versions": selectors.session_config_versions(session=session),
    }


@login_required
@require_safe
def session_detail(request: HttpRequest, pk: int) -> HttpResponse:
    session = _visible_session(request, pk)
    return render(request, "agents_app/session_detail.html", _detail_context(request, session, MessageForm()))


@login_required
@require_safe
def session_events(request: HttpRequest, pk: int) -> HttpResponse:
    """ "Load earlier events": the events before `before` (an event pk), in place of the button."""
    session = _visible_session(request, pk)
    before = number(request.GET.get("before", ""))
    if before is None or not 0 < before < 2**63:
        return HttpResponse("before must be the pk of an event of this conversation.", status=400)
    ctx = {
        "timeline": selectors.session_timeline(session, before_pk=before),
        "can_retry": can_retry_turns(request.user, session),
    }
    return render(request, "agents_app/partials/earlier.html", ctx)


@login_required
@require_POST
def message_post(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = _visible_session(request, pk)
    if not _is_owner(request, session):
        return HttpResponseForbidden("Only the person who started this conversation can write in it.")
    form = MessageForm(request.POST)
    status = 400
    if form.is_valid():
        try:
            services.message_send(session=session, text=form.cleaned_data["text"], actor=request.user)
        except services.TooManyTurns as exc:  # 429: the form comes back with the text and why
            form.add_error(None, exc.detail)
            status = exc.status
        else:
            if not request.htmx:
                return redirect("agents_app:session-detail", pk=session.pk)
            form = MessageForm()
    if request.htmx:  # base.html lets htmx swap 400s, 409s and 429s: the form comes back with its error
        ctx = {"session": session, "form": form, "sent": not form.is_bound, "is_owner": True}
        return render(
            request, "agents_app/session_detail.html#message-form", ctx, status=status if form.is_bound else 200
        )
    return render(request, "agents_app/session_detail.html", _detail_context(request, session, form), status=status)


@login_required
@require_POST
def turn_retry(request: HtmxHttpRequest, pk: int, turn_id: int) -> HttpResponse:
    session = _visible_session(request, pk)
    if not can_retry_turns(request.user, session):
        return HttpResponseForbidden(
            "Only the person who started this conversation or an approver can retry its turns."
        )
    turn = get_object_or_404(Turn, pk=turn_id, session=session)
    services.turn_retry(turn=turn)  # TurnNotRetryable: 409, by adkweb.http.RefusalMiddleware
    if request.htmx:
        return HttpResponse("Retrying…")
    return redirect("agents_app:session-detail", pk=session.pk)


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def session_new(request: HttpRequest) -> HttpResponse:
    names = agents.app_names()
    if request.method != "POST":  # GET, HEAD
        form = NewConversationForm(initial={"agent": request.GET.get("agent", "")}, agents=names)
        return render(request, "agents_app/session_new.html", {"form": form})
    form = NewConversationForm(request.POST, agents=names)
    if form.is_valid():
        try:
            session = services.conversation_start(
                app_name=form.cleaned_data["agent"], user=request.user, text=form.cleaned_data["text"]
            )
        except Refused as exc:  # e.g. the agent was disabled meanwhile, or too many turns queued (429)
            form.add_error(None, str(exc))
            return render(request, "agents_app/session_new.html", {"form": form}, status=exc.status)
        else:
            return redirect("agents_app:session-detail", pk=session.pk)
    return render(request, "agents_app/session_new.html", {"form": form}, status=400)


@login_required
@require_safe
def agent_list(request: HttpRequest) -> HttpResponse:
    ctx = {"cards": agent_cards.agent_cards(), "can_edit": is_agent_admin(request.user)}
    return render(request, "agents_app/agent_list.html", ctx)


@login_required
@require_safe
def artifact_download(request: HttpRequest, pk: int, name: str) -> HttpResponse:
    """An artifact's bytes, for whoever may see the conversation: an attachment, or (`?inline=1`)
    an image shown in the page; never rendered as a page of ours (sandboxed, no sniffing)."""
    session = _visible_session(request, pk)
    raw = request.GET.get("version", "")
    version = number(raw)
    if raw and version is None:
        return HttpResponse("The version must be a number.", status=400, content_type="text/plain")
    row = selectors.session_artifact_get(session=session, filename=name, version=version)
    if row is None or not row.content:
        raise Http404("No such artifact (or it is a reference to a file stored elsewhere).")
    inline = request.GET.get("inline") == "1" and row.mime_type in selectors.PREVIEW_TYPES
    with row.content.open("rb") as fh:
        response = HttpResponse(fh.read(), content_type=row.mime_type or "application/octet-stream")
    response["Content-Disposition"] = content_disposition_header(not inline, name.rsplit("/", 1)[-1]) or "attachment"
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response
