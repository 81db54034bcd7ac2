"""Captured runs of the demo agents for bench/pages_seed.py: real ADK Runner runs (offline model,
InMemorySessionService), dumped with DjangoSessionService's own `event_to_json`, and the means to
copy them per ticket (unique ids, new timestamps, another purpose) with the denormalised columns
DjangoSessionService computes (interrupt and response ids)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass
class Flow:
    """One captured run of an agent: phase 1 (message -> ticket) and phase 2 (answer -> result)."""

    app: str
    phase1: list[dict]
    phase2: list[dict]
    ids: list[str]  # ids to make unique per copy (events, invocations, calls)
    call: dict  # the long-running function call (the ticket)
    initial_response: dict | None
    answer: dict  # the answer's FunctionResponse.response
    kind: str
    tool_name: str


async def _capture(agent: Any, text: str, answer: dict) -> Flow:
    from google.adk.runners import Runner
    from google.adk.sessions.in_memory_session_service import InMemorySessionService
    from google.genai import types

    from agents_app.session_service import event_to_json
    from approvals.services import KIND_BY_CALL_NAME

    app = agent.name
    service = InMemorySessionService()
    runner = Runner(app_name=app, agent=agent, session_service=service)
    session = await service.create_session(app_name=app, user_id="u")
    msg = types.Content(role="user", parts=[types.Part(text=text)])
    [e async for e in runner.run_async(user_id="u", session_id=session.id, new_message=msg)]
    session = await service.get_session(app_name=app, user_id="u", session_id=session.id)
    phase1 = list(session.events)
    lr = next(e for e in phase1 if e.long_running_tool_ids)
    call = next(c for c in lr.get_function_calls() if c.id in lr.long_running_tool_ids)
    fr = types.FunctionResponse(id=call.id, name=call.name, response=answer)
    msg = types.Content(role="user", parts=[types.Part(function_response=fr)])
    [e async for e in runner.run_async(user_id="u", session_id=session.id, new_message=msg)]
    session = await service.get_session(app_name=app, user_id="u", session_id=session.id)
    phase2 = list(session.events[len(phase1) :])
    initial = next(
        (
            dict(r.response or {})
            for e in phase1
            if e.author != "user"
            for r in e.get_function_responses()
            if r.id == call.id
        ),
        None,
    )
    ids = {e.id for e in session.events} | {e.invocation_id for e in session.events}
    ids |= {c.id for e in session.events for c in e.get_function_calls()}
    kind = str(KIND_BY_CALL_NAME.get(call.name, "long_running"))
    args = dict(call.args or {})
    tool = (args.get("originalFunctionCall") or {}).get("name", call.name) if kind == "confirmation" else call.name
    return Flow(
        app=app,
        phase1=[event_to_json(e) for e in phase1],
        phase2=[event_to_json(e) for e in phase2],
        ids=sorted(i for i in ids if i),
        call={"id": call.id, "name": call.name, "args": args, "invocation_id": lr.invocation_id},
        initial_response=initial,
        answer=answer,
        kind=kind,
        tool_name=tool,
    )


def capture_flows() -> dict[str, Flow]:
    """Real runs of the demo agents (offline model), one per kind of ticket and outcome."""

    from agents_app.agents import build_agent

    reimburse, transfer, support = (build_agent(a) for a in ("reimbursement_agent", "transfer_agent", "ticket_agent"))

    async def go() -> dict[str, Flow]:
        return {
            "approve": await _capture(reimburse, "Please reimburse 200$ for meals", {"status": "approved"}),
            "reject": await _capture(
                reimburse, "Please reimburse 200$ for meals", {"status": "rejected", "reason": "no receipt"}
            ),
            "transfer": await _capture(transfer, "Please transfer $500 to Bob", {"confirmed": True}),
            "support": await _capture(support, "Open a high urgency ticket", {"status": "resolved"}),
        }

    return asyncio.run(go())


def capture_chat() -> list[dict]:
    """A chat turn without a ticket: stock_agent's tool call and reply (4 events)."""
    from google.adk.runners import Runner
    from google.adk.sessions.in_memory_session_service import InMemorySessionService
    from google.genai import types

    from agents_app.agents import build_agent
    from agents_app.session_service import event_to_json

    agent = build_agent("stock_agent")

    async def go() -> list[dict]:
        service = InMemorySessionService()
        runner = Runner(app_name="stock_agent", agent=agent, session_service=service)
        s = await service.create_session(app_name="stock_agent", user_id="u")
        msg = types.Content(role="user", parts=[types.Part(text="What is the price of GOOG?")])
        [e async for e in runner.run_async(user_id="u", session_id=s.id, new_message=msg)]
        s = await service.get_session(app_name="stock_agent", user_id="u", session_id=s.id)
        return [event_to_json(e) for e in s.events]

    return asyncio.run(go())


class Copier:
    """Makes per-copy variants of captured event JSON: unique ids, new timestamps, a purpose."""

    def __init__(self, ids: Iterable[str]) -> None:
        ids = list(ids)
        self.pattern = re.compile("|".join(re.escape(i) for i in sorted(ids, key=len, reverse=True))) if ids else None

    def text(self, template: str, suffix: str, purpose: str = "meals") -> str:
        out = self.pattern.sub(lambda m: m.group(0) + suffix, template) if self.pattern else template
        return out.replace("meals", purpose) if purpose != "meals" else out


def event_ids(data: dict) -> tuple[list[str], list[str]]:
    """interrupt_ids and response_ids of an event, as DjangoSessionService computes them."""
    from agents_app.session_service import event_from_json, event_interrupt_ids, event_response_ids

    event = event_from_json(data)
    return event_interrupt_ids(event), event_response_ids(event)
