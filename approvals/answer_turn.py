"""The turn that carries a decision's answers to the agent (approvals.decisions): the function response
each answer not held for a quorum becomes, and a /run message's other parts beside them, which go with
its answers or not at all (`PartsWouldWait`)."""

from __future__ import annotations

from google.genai import types

from adkweb.errors import Conflict
from agents_app.agents import remote_app

from .decision_plan import Plan
from .models import PendingCall


class PartsWouldWait(Conflict):
    """A /run message whose every answer is an approval held for a quorum, with other parts beside them (a
    file, an image): nothing reaches the agent until the quorum is reached, and those parts would be lost
    (ADK takes a message whole; sent alone they would start a new invocation, out of the answer's
    context). Nothing is recorded (HTTP 409)."""

    def __init__(self, tickets: list[PendingCall]) -> None:
        which = ", ".join(f"#{t.pk} needs {t.required_approvals} approvals" for t in tickets)
        super().__init__(
            f"Ticket {which}: your approval would wait for the others, and nothing reaches the agent until then, "
            "so the message's other parts (a file or an image beside the answer) would not reach it. Send the "
            "approval alone, and the other parts with text in a message of their own."
        )


def turn_parts(plans: list[Plan], message: types.Content | None = None) -> list[types.Part]:
    """The parts of the turn that carries these answers to the agent: each answer not held for a quorum
    (`function_response`). A client's message (/run) goes as ADK's runner takes one, whole: its other
    parts (a file or an image beside the answers) and each answer's part as sent, the held answers' left
    out; none at all when every answer is held (nothing reaches the agent yet): a message with other parts
    is then refused (`PartsWouldWait`), not sent in part, since its parts go with its answers or not at all."""
    if message is None:
        return [types.Part(function_response=function_response(p)) for p in plans if not p.held]
    by_call = {p.answer.ticket.call_id: p for p in plans}
    parts = []
    for part in message.parts or []:
        plan = by_call.get(part.function_response.id or "") if part.function_response is not None else None
        if plan is None:
            parts.append(part)
        elif not plan.held:
            parts.append(part.model_copy(update={"function_response": function_response(plan)}))
    if parts and not any(p.function_response is not None for p in parts):
        raise PartsWouldWait([p.answer.ticket for p in plans])
    return parts


def function_response(plan: Plan) -> types.FunctionResponse:
    """What reaches the agent: a client's response exactly as sent, every field of it (`will_continue`,
    `scheduling`, its `parts`, every key of its response: an approval of edited arguments cannot come
    this way, `ArgumentsUnsaid`, so there are no edits to merge in); one built here has no
    `will_continue` when final (ADK's own client sends none, and Vertex AI refuses the field) and
    `will_continue=True` when intermediate (dropped again for backends that refuse it, see
    agents_app.plugins)."""
    answer, ticket = plan.answer, plan.answer.ticket
    if answer.sent is not None:
        return answer.sent
    # A remote app's model backend is not ours to know (its server cannot drop the field for Vertex AI):
    # send it what ADK's own client sends, no `will_continue` at all.
    quiet = answer.final or remote_app(ticket.app_name) is not None
    return types.FunctionResponse(
        id=ticket.call_id, name=ticket.call_name, response=answer.payload, will_continue=None if quiet else True
    )
