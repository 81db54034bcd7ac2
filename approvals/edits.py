"""Edit before approve: which arguments of a ticket an approver may change, and checking an edit
against the tool's declaration (types checked, required arguments kept, nothing unknown added) and
against the policies (an edit keeps the ticket under the rules of the arguments the agent asked with)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from adkweb.errors import Conflict, Invalid

from .models import PendingCall
from .payloads import InvalidResponse, changes
from .policy_cache import candidates
from .policy_match import Choice, choose

EDITABLE_KINDS = (PendingCall.Kind.LONG_RUNNING, PendingCall.Kind.CONFIRMATION)
SIMPLE_TYPES = ("string", "number", "integer", "boolean")


class InvalidEdit(Invalid):
    """Edited arguments that do not fit the tool's declaration (HTTP 400)."""


class EditChangesRules(Conflict):
    """Edited arguments another policy would govern than the arguments the agent asked with (HTTP 409)."""


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # string, number, integer, boolean
    required: bool
    title: str = ""
    description: str = ""
    enum: tuple[Any, ...] = ()


def _json_type(value: Any) -> str | None:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return None


def params(ticket: PendingCall) -> list[Param] | None:
    """The editable parameters, from the tool's declaration (or, for a tool that declares none, the
    arguments it was called with); None when this ticket's arguments cannot be edited (`not_editable`)."""
    if ticket.kind not in EDITABLE_KINDS or remote_confirmation(ticket):
        return None
    return declared(ticket)


def declared(ticket: PendingCall) -> list[Param] | None:
    """`params` whoever runs the tool: the parameters its declaration gives (or the arguments it was
    called with), which an approval's own values may not change (`answer_refusal`)."""
    from agents_app.agents import tool_parameters

    if ticket.kind not in EDITABLE_KINDS:
        return None

    schema = tool_parameters(ticket.app_name, ticket.tool_name)
    args = ticket.tool_args
    if not schema or not isinstance(schema.get("properties"), dict):
        derived = [Param(k, t, True) for k, v in args.items() if (t := _json_type(v))]
        return derived if derived and len(derived) == len(args) else None
    required = set(schema.get("required") or [])
    out = []
    for name, prop in schema["properties"].items():
        kind = str((prop or {}).get("type", "")).lower()
        if kind not in SIMPLE_TYPES:
            return None  # nested objects and lists: not edited in a form
        out.append(
            Param(
                name=name,
                type=kind,
                required=name in required,
                title=str(prop.get("title") or name.replace("_", " ").capitalize()),
                description=str(prop.get("description") or ""),
                enum=tuple(prop.get("enum") or ()),
            )
        )
    return out or None


def _fits(param: Param, value: Any) -> bool:
    kind = _json_type(value)
    if param.type == "number":
        try:
            ok = kind in ("number", "integer") and math.isfinite(float(value))
        except OverflowError:  # an integer past a float's range (JSON bounds no digits): no number a tool takes
            ok = False
    else:
        ok = kind == param.type
    return ok and (not param.enum or value in param.enum)


def remote_confirmation(ticket: PendingCall) -> bool:
    """A confirmation of a remote app: its ADK server runs the confirmed call with its model's arguments
    (adkweb's plugin, which puts the approved ones in their place, runs here only), so an edit would be
    recorded as approved and not carried out."""
    from agents_app.agents import remote_app

    return ticket.kind == PendingCall.Kind.CONFIRMATION and remote_app(ticket.app_name) is not None


def not_editable(ticket: PendingCall) -> InvalidEdit:
    """Why this ticket's arguments cannot be edited (HTTP 400)."""
    if remote_confirmation(ticket):
        return InvalidEdit(
            f"The arguments of ticket #{ticket.pk} cannot be edited: it is a confirmation of {ticket.app_name!r}, "
            "served by a remote ADK server, which runs the confirmed call with its model's arguments (an edit "
            "would be recorded and not carried out). Approve it as asked, or reject it with a reason."
        )
    return InvalidEdit(f"The arguments of a {ticket.get_kind_display()} ticket of this tool cannot be edited.")


def check(ticket: PendingCall, edited: Any) -> dict[str, Any]:
    """The edited arguments if they fit the declaration, else InvalidEdit saying what is wrong."""
    fields = params(ticket)
    if fields is None:
        raise not_editable(ticket)
    if not isinstance(edited, dict):
        raise InvalidEdit("Edited arguments must be a JSON object of argument names to values.")
    known = {p.name: p for p in fields}
    unknown = sorted(set(edited) - set(known))
    if unknown:
        raise InvalidEdit(f"{ticket.tool_name} has no argument named {', '.join(unknown)}.")
    problems = []
    for p in fields:
        if p.name not in edited or edited[p.name] is None:
            if p.required:
                problems.append(f"{p.name} is required")
            continue
        if not _fits(p, edited[p.name]):
            allowed = f"one of {', '.join(map(repr, p.enum))}" if p.enum else f"a {p.type}"
            problems.append(f"{p.name} must be {allowed}")
    if problems:
        raise InvalidEdit("Edited arguments refused: " + "; ".join(problems) + ".")
    cleaned = {k: v for k, v in edited.items() if v is not None}
    if ticket.kind == PendingCall.Kind.LONG_RUNNING and "status" in changes(ticket, cleaned):
        # The answer's own "status" says the decision: an edited value there would replace "approved".
        raise InvalidEdit(
            f"{ticket.tool_name}'s argument 'status' cannot be edited: the agent reads the approval's answer "
            'as {"status": "approved", ...}, and an edited status would take the decision\'s place. Reject the '
            "ticket with the reason, so that the agent asks again with the value meant."
        )
    return cleaned


def rules_refusal(ticket: PendingCall, edited: dict[str, Any]) -> EditChangesRules | None:
    """An edit may not move a ticket under other rules (raise an amount past a stricter policy's
    condition, change a recipient its policy names): the policy the edited arguments fall under must be
    the one the arguments the agent asked with fall under, both matched as a new ticket's are, against
    the policies now (a policy changed since the ticket opened moves neither). The ticket keeps the rules
    it opened with: its quorum, groups and deadlines were drawn for the arguments the agent asked with."""
    fitting = candidates(app_name=ticket.app_name, tool_name=ticket.tool_name, kind=ticket.kind)
    asked, as_edited = choose(fitting, ticket.tool_args, ticket.kind), choose(fitting, edited, ticket.kind)
    if asked.policy == as_edited.policy:
        return None
    return EditChangesRules(
        f"The arguments of ticket #{ticket.pk} as edited ({changes_text(ticket.tool_args, edited)}) fall under "
        f"{_rules(as_edited)}, the arguments the agent asked with under {_rules(asked)}: an edit may not move a "
        "ticket to other rules. Approve the arguments as asked, or reject it (the agent may ask again with "
        "these)."
    )


def answer_refusal(ticket: PendingCall, said: Any, approved: dict[str, Any], via_run: bool) -> InvalidResponse | None:
    """An approval's own values (a confirmation's payload, which its tool reads for the values to use; a
    long-running tool's answer, which the agent reads) may not say other values for the call's arguments
    than those it approves: that would change what the tool does with no edit recorded, the policies
    unmatched and every summary saying otherwise. A value equal to the argument's (a client echoing the
    call back) and any other key (a note) go. `said`: the keys the approver wrote."""
    if not isinstance(said, dict):
        return None
    names = set(ticket.tool_args) | {p.name for p in declared(ticket) or ()}
    changed = {k: v for k, v in said.items() if k in names and v != approved.get(k)}
    if not changed:
        return None
    approve = f"POST /api/pending-calls/{ticket.pk}/approve"
    how = (
        f"{approve} with them: a function response on /run cannot carry an edit"
        if via_run
        else f"{approve} with them, or the argument fields of the ticket page's Approve"
    )
    return InvalidResponse(
        f"This answer to ticket #{ticket.pk} says other values for {ticket.tool_name}'s arguments than those it "
        f"approves ({changes_text(approved, {**approved, **changed})}): to change the arguments, edit them "
        f"(editedArgs: {how}), so that the edit is recorded and checked against the policies."
    )


def _rules(choice: Choice) -> str:
    policy = choice.policy
    rules = f"the policy {policy.name!r}" if policy is not None else "the default rule (any approver, one decision)"
    return rules + (f" ({choice.undecided})" if choice.undecided else "")


def diff(original: dict[str, Any], edited: dict[str, Any] | None) -> list[tuple[str, Any, Any]]:
    """(name, before, after) for each argument an edit changed, in the original's order."""
    if edited is None:
        return []
    names = list(original) + [k for k in edited if k not in original]
    return [(k, original.get(k), edited.get(k)) for k in names if original.get(k) != edited.get(k)]


def edited(ticket: PendingCall) -> bool:
    """Whether an approver's edit left the ticket's arguments other than those the agent asked for."""
    return ticket.edited_args is not None and ticket.edited_args != ticket.tool_args


def changes_text(before: dict[str, Any], after: dict[str, Any]) -> str:
    """What an edit changed, for people: "amount $200.00 → $150.00, purpose meals → lunch"."""
    from agents_app.summaries import readable

    return ", ".join(f"{k} {readable(a, k)} → {readable(b, k)}" for k, a, b in diff(before, after))


def edit_note(ticket: PendingCall, limit: int = 200) -> str:
    """An edit as the ticket's summaries mark it, beside the edited arguments they show: "edited by ann:
    amount $200.00 → $150.00" (at most `limit` characters); "" when nobody edited them. `edited_by` is
    read from the ticket: select_related it where many are shown."""
    if not edited(ticket):
        return ""
    by = f" by {ticket.edited_by_label}" if ticket.edited_by_label else ""
    note = f"edited{by}: {changes_text(ticket.tool_args, ticket.current_args)}"
    return note if len(note) <= limit else note[: limit - 1] + "…"
