"""The approvals API (`/api/pending-calls...`): list, read and answer tickets over HTTP.

Same rules as the inbox pages: the views parse and call `approvals.services`, whose refusals
(`adkweb.errors`) `api_view` answers as `{"detail": ...}`: 400 (bad body for the ticket's kind),
403 (may see it but not answer it: not in its groups' decision, the requester under four-eyes, an
approval that already counts), 404 (missing, or not in the caller's sight), 409 (already closed, a
stale `argsHash`, or an approval of arguments an approver edited that says neither `argsHash` nor
`editedArgs`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from django.http import HttpRequest, JsonResponse, StreamingHttpResponse
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from adkweb import paging
from adkweb.api import api_view, int_param, json_body, parse
from adkweb.errors import Invalid, NotFound
from agents_app import idempotency
from agents_app.idempotency import Outcome

from . import audit_views, edits, selectors, services
from .api_json import response_json, ticket_json
from .grants import GrantSpec
from .models import PendingCall, Response

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
Text = Annotated[StrictStr, Field(max_length=2000)]  # the ticket page's forms allow as much


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


Hash = Annotated[StrictStr, Field(min_length=64, max_length=64)]


class GrantSpecBody(_Body):
    scope: Literal["session", "user"]
    minutes: StrictInt


class ResponseBody(_Body):
    response: dict[str, Any]
    final: StrictBool = True
    comment: Text = ""
    argsHash: Hash | None = None  # the API's own camelCase: the arguments the caller saw


class ApproveBody(_Body):
    comment: Text = ""
    payload: dict[str, Any] | None = None  # confirmations: the payload the tool receives
    argsHash: Hash | None = None
    editedArgs: dict[str, Any] | None = None  # approve these arguments instead (the agent gets them)
    grant: GrantSpecBody | None = None  # and allow the tool for a while (standing grant)


class RejectBody(_Body):
    reason: Text = ""
    comment: Text = ""  # accepted as a synonym of reason
    argsHash: Hash | None = None


class AssignBody(_Body):
    assignee: StrictStr | None  # "me" takes the ticket, null gives it back


def _visible(request: HttpRequest, ticket_id: int) -> PendingCall:
    ticket = selectors.ticket_visible_get(user=request.user, ticket_id=ticket_id)
    if ticket is None:
        raise NotFound(f"Pending call not found: {ticket_id}")
    return ticket


_BOOLEANS = {"": False, "0": False, "false": False, "1": True, "true": True}


def _choice(request: HttpRequest, name: str, allowed: tuple[str, ...] | list[str], default: str) -> str:
    value = request.GET.get(name, default)
    if value not in allowed:
        raise Invalid(f"Unknown {name} {value!r}; use one of: {', '.join(allowed)}.")
    return value


def _cursor(request: HttpRequest, name: str) -> str:
    """A keyset cursor, as the list's own `next`/`previous` links carry it."""
    value = request.GET.get(name, "")
    if value and paging.cursor_parse(value, datetime) is None:
        raise Invalid(f"Query parameter {name!r} is not a cursor; follow the list's next and previous links.")
    return value


def _filters(request: HttpRequest) -> selectors.InboxFilters:
    """The inbox's filters (approvals.selectors.InboxFilters), where a value the inbox would quietly
    ignore is a 400 here: an API caller is told, not shown something else."""
    mine = request.GET.get("mine", "").lower()
    if mine not in _BOOLEANS:
        raise Invalid(f"Query parameter 'mine' must be true or false, not {mine!r}.")
    q = request.GET.get("q", "").strip()
    if len(q) > selectors.SEARCH_MAX:
        raise Invalid(f"Query parameter 'q' is at most {selectors.SEARCH_MAX} characters.")
    return selectors.InboxFilters(
        status=_choice(request, "status", selectors.API_STATUS_FILTERS, "open"),
        kind=_choice(request, "kind", PendingCall.Kind.values, "") if request.GET.get("kind") else "",
        agent=request.GET.get("agent", ""),
        tool=request.GET.get("tool", ""),
        mine=_BOOLEANS[mine],
        q=q,
        sort=_choice(request, "sort", selectors.SORTS, selectors.SORTS[0]),
        page=int_param(request, "page", 1),
        after=_cursor(request, "after"),
        before=_cursor(request, "before"),
    )


def _page_url(request: HttpRequest, page: int, **cursor: str) -> str:
    query = request.GET.copy()
    query.pop("after", None)
    query.pop("before", None)
    query.update({"page": str(page), **cursor})
    return f"{request.path}?{query.urlencode()}"


@api_view("GET")
def pending_calls(request: HttpRequest) -> JsonResponse:
    """The inbox's list over HTTP: the same filters, keyset pages (each `next`/`previous` link carries
    its page's edge, so a deep page costs what the first does and new tickets do not shift it) and a
    count capped at paging.COUNT_CAP (`count_exact` false beyond it)."""
    filters = _filters(request)
    size = int_param(request, "page_size", DEFAULT_PAGE_SIZE, high=MAX_PAGE_SIZE)
    page = selectors.inbox_page(filters=filters, user=request.user, per_page=size, related=selectors.API_TICKET_RELATED)
    n = page.number
    return JsonResponse(
        {
            "count": min(page.total, paging.COUNT_CAP),
            "count_exact": not page.total_capped,
            "page": n,
            "page_size": size,
            "next": _page_url(request, n + 1, after=page.next_cursor) if page.has_next() else None,
            "previous": _page_url(request, n - 1, before=page.previous_cursor) if page.has_previous() else None,
            "results": [ticket_json(ticket) for ticket in page],
        }
    )


@api_view("GET")
def pending_call(request: HttpRequest, ticket_id: int) -> JsonResponse:
    ticket = _visible(request, ticket_id)
    return JsonResponse(ticket_json(ticket, responses=selectors.ticket_responses(ticket=ticket)))


def _created(request: HttpRequest, submit: Callable[[], Response]) -> JsonResponse:
    """201 with the recorded response; retried with the same Idempotency-Key, the first answer again."""
    return idempotency.json_answer(idempotency.idempotent(request, lambda: Outcome(201, response_json(submit()))))


@api_view("GET", "POST")
def responses(request: HttpRequest, ticket_id: int) -> JsonResponse:
    ticket = _visible(request, ticket_id)
    if request.method == "GET":
        return JsonResponse([response_json(r) for r in selectors.ticket_responses(ticket=ticket)], safe=False)
    body = parse(ResponseBody, json_body(request))
    return _created(
        request,
        lambda: services.response_submit(
            ticket=ticket,
            actor=request.user,
            payload=body.response,
            final=body.final,
            comment=body.comment,
            args_hash=body.argsHash,
        ),
    )


def _optional_body(request: HttpRequest) -> Any:
    """No body (or JSON null) is {}; anything else must be an object (`[]` or `0` is not "no body")."""
    data = json_body(request, allow_empty=True)
    return {} if data is None else data


@api_view("POST")
def approve(request: HttpRequest, ticket_id: int) -> JsonResponse:
    ticket = _visible(request, ticket_id)
    body = parse(ApproveBody, _optional_body(request))
    grant = GrantSpec(scope=body.grant.scope, minutes=body.grant.minutes) if body.grant else None
    if body.editedArgs is not None and edits.params(ticket) is None:
        raise edits.not_editable(ticket)
    if body.payload is not None and ticket.kind != PendingCall.Kind.CONFIRMATION:
        raise Invalid(  # the approval's body is fixed for other kinds: the payload would be dropped unseen
            f"'payload' goes with a confirmation's approval; ticket #{ticket.pk} is a {ticket.get_kind_display()}: "
            "send your own response through /responses, or change the arguments with 'editedArgs'."
        )
    return _created(
        request,
        lambda: services.ticket_approve(
            ticket=ticket,
            actor=request.user,
            comment=body.comment,
            payload=body.payload,
            args_hash=body.argsHash,
            edited_args=body.editedArgs,
            grant=grant,
        ),
    )


@api_view("POST")
def reject(request: HttpRequest, ticket_id: int) -> JsonResponse:
    ticket = _visible(request, ticket_id)
    body = parse(RejectBody, _optional_body(request))
    reason = body.reason or body.comment
    return _created(
        request,
        lambda: services.ticket_reject(ticket=ticket, actor=request.user, reason=reason, args_hash=body.argsHash),
    )


@api_view("POST")
def assign(request: HttpRequest, ticket_id: int) -> JsonResponse:
    """Take an open ticket (`{"assignee": "me"}`) or give it back (`{"assignee": null}`)."""
    ticket = _visible(request, ticket_id)
    body = parse(AssignBody, json_body(request))
    if body.assignee not in (None, "me"):
        raise Invalid('assignee must be "me" or null: approvers assign tickets to themselves.')
    ticket = services.ticket_assign(ticket=ticket, actor=request.user, assignee=request.user if body.assignee else None)
    return JsonResponse(ticket_json(selectors.ticket_get(ticket_id=ticket.pk) or ticket))


@api_view("GET")
def audit_csv(request: HttpRequest) -> StreamingHttpResponse:
    """The audit page's CSV export for API clients: same filters, scope and refusals."""
    return audit_views.export_response(request.user, request.GET, "csv")


@api_view("GET")
def audit_jsonl(request: HttpRequest) -> StreamingHttpResponse:
    """The audit page's JSON Lines export for API clients: same filters, scope and refusals."""
    return audit_views.export_response(request.user, request.GET, "jsonl")
