"""What an answer to a ticket says to the agent, per kind of ticket, and whether a body fits it."""

from __future__ import annotations

from typing import Any

from adkweb.errors import Invalid

from .models import PendingCall, Response

# A final answer's status as agents read it: "done" / "completed" / "resolved" say the request was carried
# out (the demo agent pays on them, as on "approved"), so they are approvals, with an approval's rules
# (its arguments, the quorum's count); "cancelled" is a rejection. It was recorded "answered", no rule of
# an approval applied: {"status": "done", "amount": 99999} on a $200 ticket had the agent pay $99,999.
APPROVED_WORDS = {"approved", "approve", "accepted", "ok", "yes", "done", "completed", "resolved"}
REJECTED_WORDS = {"rejected", "reject", "denied", "declined", "no", "cancelled", "canceled"}
EXPIRED = "expired"
# Statuses that say a request was decided or is over (ours, and those agents read so: the demo agent's
# approval and rejection words, held to these by tests/approvals/test_updates_do_not_decide.py). An
# intermediate answer (an update: the ticket stays open) carrying one told the agent its request was
# decided, past the ticket's rules: a single update {"status": "approved"} on a ticket needing two
# approvals had the agent reimburse.
OVER_WORDS = {EXPIRED, "closed"}
DECIDING_WORDS = APPROVED_WORDS | REJECTED_WORDS | OVER_WORDS


class InvalidResponse(Invalid):
    """A response body that does not fit the ticket's kind (HTTP 400)."""


def changes(ticket: PendingCall, edited: dict[str, Any] | None = None) -> dict[str, Any]:
    """The arguments an approver changed, as the agent receives them (a removed one is null)."""
    edited = ticket.edited_args if edited is None else edited
    if edited is None:
        return {}
    original = ticket.tool_args
    out = {k: v for k, v in edited.items() if k not in original or original[k] != v}
    out.update({k: None for k in original if k not in edited})
    return out


# Where an approval's body carries the approver's comment: the first key that names none of the call's
# arguments (a tool with a `comment` argument reads its value there, as an agent reads an edited amount).
COMMENT_KEYS = ("comment", "approver_comment", "approval_comment")


def approve_payload(
    ticket: PendingCall, comment: str = "", payload: dict | None = None, edited: dict | None = None
) -> dict[str, Any]:
    """Approved; with the edited values when an approver edited the arguments (`with_edits`), and the
    approver's comment under a key that is not an argument's (`comment_key`): never in an approved value's
    place, nor read as the call's own value of an argument it left unsaid."""
    if ticket.kind == PendingCall.Kind.CONFIRMATION:  # the tool reads the payload as tool_confirmation.payload
        return with_edits(ticket, {"confirmed": True, **({"payload": payload} if payload else {})}, edited)
    body = with_edits(ticket, {"status": "approved"}, edited)
    key = comment_key(ticket, edited) if comment else None
    if key:
        body[key] = comment
    return body


def comment_key(ticket: PendingCall, edited: dict | None = None) -> str | None:
    """The first of COMMENT_KEYS that names no argument of the call (as called, declared or edited), or
    None: the comment then stays in the record only (Response.comment), out of the agent's answer."""
    names = argument_names(ticket) | set(edited or ()) | set(ticket.edited_args or ())
    return next((key for key in COMMENT_KEYS if key not in names), None)


def argument_names(ticket: PendingCall) -> set[str]:
    """The call's arguments' names: as called, and as its tool declares them."""
    from agents_app.agents import tool_parameters

    schema = tool_parameters(ticket.app_name, ticket.tool_name)
    declared = schema.get("properties") if isinstance(schema, dict) else None
    return set(ticket.tool_args) | set(declared if isinstance(declared, dict) else ())


def with_edits(ticket: PendingCall, body: dict[str, Any], edited: dict | None = None) -> dict[str, Any]:
    """An approving answer (`{"status": "approved"}`, `{"confirmed": true}`: ours, or one a client wrote),
    with the edited arguments' values merged in where an approver edited them (a confirmation's into its
    payload): the agent acts on the arguments the approval approves, not the call's."""
    changed = changes(ticket, edited)
    if not changed:
        return body
    if ticket.kind == PendingCall.Kind.CONFIRMATION:
        said = body.get("payload")
        return {**body, "payload": {**(said if isinstance(said, dict) else {}), **changed}}
    return {**body, **changed}


def reject_payload(ticket: PendingCall, reason: str = "") -> dict[str, Any]:
    if ticket.kind == PendingCall.Kind.CONFIRMATION:
        return {"confirmed": False, "payload": {"reason": reason}} if reason else {"confirmed": False}
    body: dict[str, Any] = {"status": "rejected"}
    if reason:
        body["reason"] = reason
    return body


def update_payload(message: str, progress: float | None = None, extra: dict | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"status": "in_progress", **(extra or {})}
    if message:
        body["message"] = message
    if progress is not None:
        body["progress"] = progress
    return body


def expire_payload(ticket: PendingCall, reason: str) -> dict[str, Any]:
    """The final answer of a ticket nobody decided in time: a distinct outcome, `status: "expired"`."""
    if ticket.kind == PendingCall.Kind.CONFIRMATION:
        return {"confirmed": False, "payload": {"status": EXPIRED, "reason": reason}}
    return {"status": EXPIRED, "reason": reason}


def validate(ticket: PendingCall, payload: Any, final: bool) -> None:
    """Refuse a body that does not fit the ticket's kind, before anything is stored or sent."""
    if not isinstance(payload, dict):
        raise InvalidResponse("The response must be a JSON object.")
    status = status_word(payload)
    if not final and status in DECIDING_WORDS:
        raise InvalidResponse(
            f"An update (final: false) reports progress and leaves the ticket open: its status may not be "
            f"{payload['status']!r}, which tells the agent the request was decided. Approve or reject it "
            "(a final answer) instead, or send another status such as 'in_progress'."
        )
    if ticket.kind == PendingCall.Kind.CONFIRMATION:
        if not final:
            raise InvalidResponse("A confirmation takes one final answer (confirmed true or false), not updates.")
        extra = set(payload) - {"confirmed", "payload", "hint"}
        if extra or not isinstance(payload.get("confirmed"), bool):
            raise InvalidResponse(
                'A confirmation response is {"confirmed": true|false, "payload": {...}}'
                + (
                    f"; unexpected keys: {', '.join(sorted(extra))}."
                    if extra
                    else "; 'confirmed' must be true or false."
                )
            )
    problem = schema_problem(ticket, payload)
    if problem:
        raise InvalidResponse(
            f"This ticket asks for input matching its schema: {problem}. Send a response that fits it."
        )


def schema_problem(ticket: PendingCall, payload: dict[str, Any]) -> str | None:
    """Why a body fails the ticket's response schema (ADK would fail the run after storing it)."""
    schema = ticket.response_schema
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return None
    import jsonschema

    try:
        jsonschema.validate(payload, schema)
    except jsonschema.ValidationError as exc:
        return str(exc.message)
    except jsonschema.SchemaError:
        return None  # the model wrote an invalid schema; let ADK be the judge
    return None


def status_word(payload: dict[str, Any]) -> str:
    """An answer's status as both readings of it take it (an update's check, a final answer's decision)."""
    return str(payload.get("status", "")).strip().lower()


def decision_of(action: str, ticket: PendingCall, payload: dict[str, Any]) -> str:
    """What a final answer decides: approved, rejected, or just answered."""
    if action == Response.Action.APPROVE:
        return PendingCall.Status.APPROVED
    if action == Response.Action.REJECT:
        return PendingCall.Status.REJECTED
    if action == Response.Action.EXPIRE:
        return PendingCall.Status.EXPIRED
    if ticket.kind == PendingCall.Kind.CONFIRMATION:
        return PendingCall.Status.APPROVED if payload.get("confirmed") else PendingCall.Status.REJECTED
    word = status_word(payload)
    if word in APPROVED_WORDS:
        return PendingCall.Status.APPROVED
    if word in REJECTED_WORDS:
        return PendingCall.Status.REJECTED
    return PendingCall.Status.ANSWERED
