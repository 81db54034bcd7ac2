"""The approvals API's route table (mounted under /api/) and its response models: the URL patterns
and the OpenAPI document are generated from it; tests validate real answers against the models."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from adkweb.routes import Op, Route

from . import api, policy_routes
from .policy_routes import PassedOverPolicy


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TicketSession(_Out):
    app_name: str
    user_id: str
    session_id: str


class TicketResponse(_Out):
    """One response sent to a ticket (append-only)."""

    id: int
    pending_call: int
    action: str
    response: dict[str, Any]
    final: bool
    comment: str
    actor: str | None = Field(
        description="The decider's username when they decided (kept if the user is renamed or deleted)."
    )
    actorName: str | None = Field(description="The decider's display name when they decided.")
    turn: int | None
    created_at: str | None
    source: str
    grant: int | None
    argsHash: str | None
    editedArgs: dict[str, Any] | None


class TicketPolicy(_Out):
    """The policy (and its version) that gave the ticket its rules."""

    id: int | None
    name: str
    version: int | None
    # Why its condition could not be decided on the arguments, so that it applied (fail closed); else null.
    undecided: str | None


class TicketApproval(_Out):
    """One approval that counts toward the ticket's required approvals."""

    who: str | None
    when: str | None
    source: str


class Ticket(_Out):
    """A pending call: one open (or closed) human pause of an agent."""

    id: int
    url: str
    kind: str
    status: str
    agent: str
    tool: str
    call_id: str
    call_name: str
    args: dict[str, Any]
    initial_response: dict[str, Any] | None
    hint: str | None
    response_schema: dict[str, Any] | None
    session: TicketSession
    requester: str
    invocation_id: str
    assigned_to: str | None
    due_at: str | None
    created_at: str | None
    updated_at: str | None
    closed_at: str | None
    closed_by: str | None
    policy: TicketPolicy | None
    requiredApprovals: int  # the API's own camelCase, as the policies API
    approvals: list[TicketApproval] = Field(
        description="The approvals that count: while open, those whose givers may still decide it; closed, "
        "those its closing decision recorded as counting then (every approval if it recorded none)."
    )
    lapsedApprovals: list[TicketApproval] = Field(
        description="Approvals of the arguments as they are now that do not count: their givers may no longer "
        "decide the open ticket (left its groups, lost the approvers' permission, deactivated), or could not "
        "when it closed."
    )
    approvalsRecorded: bool | None = Field(
        description="Closed: true when `approvals` and `lapsedApprovals` are those recorded when it closed (by "
        "its closing decision, or a cancelled ticket's cancel: the held approvals that would have counted), "
        "false when its close recorded none (closed before the record was kept); null while open."
    )
    fourEyes: bool
    approverGroups: list[str]
    dueAt: str | None
    remindAt: str | None
    escalateAt: str | None
    escalatedAt: str | None
    passedOver: list[PassedOverPolicy] = Field(
        description="The policies that would have approved it at once but whose condition could not be decided "
        "on its arguments, so they were passed over (the next policy or the default rule applies); else empty."
    )
    argsHash: str
    editedArgs: dict[str, Any] | None
    editedBy: str | None
    editedAt: str | None
    responses: list[TicketResponse] | None = None


class TicketPage(_Out):
    count: int
    count_exact: bool
    page: int
    page_size: int
    next: str | None
    previous: str | None
    results: list[Ticket]


ANSWER_ERRORS = (400, 401, 403, 404, 409, 413)
ROUTES = [
    Route(
        "pending-calls",
        api.pending_calls,
        "pending-calls",
        (
            Op(
                "GET",
                "The tickets you may see, newest first, a page at a time",
                response=TicketPage,
                query={
                    "status": "open (default), pending, in_progress, closed, approved, rejected, answered, all, ...",
                    "kind": "long_running, confirmation, input, choice, credential",
                    "agent": "an app name",
                    "tool": "a tool name",
                    "mine": "true: only tickets assigned to you, closed by you or that you answered",
                    "q": "search the arguments, tool and requester (or #id), at most 200 characters",
                    "sort": "newest (default) or oldest",
                    "after": "a cursor: follow the `next` link",
                    "before": "a cursor: follow the `previous` link",
                    "page": "from 1 (by offset; the links page by cursor)",
                    "page_size": "1 to 200 (default 50)",
                },
                errors=(400, 401),
            ),
        ),
    ),
    Route(
        "pending-calls/<int:ticket_id>",
        api.pending_call,
        "pending-call",
        (Op("GET", "A ticket with its responses", response=Ticket, errors=(401, 404)),),
    ),
    Route(
        "pending-calls/<int:ticket_id>/responses",
        api.responses,
        "responses",
        (
            Op("GET", "A ticket's responses, oldest first", response=list[TicketResponse], errors=(401, 404)),
            Op(
                "POST",
                "Send a response (final by default; final: false is an intermediate update)",
                request=api.ResponseBody,
                response=TicketResponse,
                errors=ANSWER_ERRORS,
                status=201,
            ),
        ),
    ),
    Route(
        "pending-calls/<int:ticket_id>/approve",
        api.approve,
        "approve",
        (
            Op(
                "POST",
                "Approve (confirmations: confirmed true); body optional",
                request=api.ApproveBody,
                response=TicketResponse,
                errors=ANSWER_ERRORS,
                status=201,
            ),
        ),
    ),
    Route(
        "pending-calls/<int:ticket_id>/reject",
        api.reject,
        "reject",
        (
            Op(
                "POST",
                "Reject with a reason; body optional",
                request=api.RejectBody,
                response=TicketResponse,
                errors=ANSWER_ERRORS,
                status=201,
            ),
        ),
    ),
    Route(
        "pending-calls/<int:ticket_id>/assign",
        api.assign,
        "assign",
        (
            Op(
                "POST",
                'Take an open ticket ({"assignee": "me"}) or give it back (null): approvers',
                request=api.AssignBody,
                response=Ticket,
                errors=(400, 401, 403, 404, 409),
            ),
        ),
    ),
]
AUDIT_QUERY = {
    "agent": "an app name",
    "tool": "a tool name",
    "person": "the decider's username or display name",
    "outcome": "approve, reject, update, custom or expire",
    "since": "YYYY-MM-DD (from that day)",
    "until": "YYYY-MM-DD (through that day)",
}
ROUTES += [
    Route(
        "audit/decisions.csv",
        api.audit_csv,
        "audit-csv",
        (
            Op(
                "GET",
                "Every decision you may audit, newest first, as CSV (streamed; the audit page's export)",
                response=str,
                media="text/csv",
                query=AUDIT_QUERY,
                errors=(400, 401, 403),
            ),
        ),
    ),
    Route(
        "audit/decisions.jsonl",
        api.audit_jsonl,
        "audit-jsonl",
        (
            Op(
                "GET",
                "Every decision you may audit, newest first, as JSON Lines (streamed; one object per line)",
                response=str,
                media="application/x-ndjson",
                query=AUDIT_QUERY,
                errors=(400, 401, 403),
            ),
        ),
    ),
]
ROUTES += policy_routes.ROUTES
