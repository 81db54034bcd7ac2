"""A scripted agent for crash tests: it stops at an exact point of a turn, and counts tool
executions outside the process (a file), so a test can kill the worker there and check that the
resumed turn repeats nothing.

The user's text picks the work and the gate, e.g. `work a gate=after_call`:

- `work <label>`: the model calls `side_effect(label)`, then replies `done <label>`.
- `slow <label>`: the model calls `slow_tool(label)` (sleeps ADKWEB_TEST_SLOW_SECONDS), then replies.
- `signoff <label>`: the model calls the long-running `request_signoff(label)` (a ticket); after
  the tool's pending answer it says `waiting <label>`, after the human's answer `signed <label>`.
- `boom <label>`: the model calls `broken_tool(label)`, which raises.
- `confirm <label>`: the model calls `guarded_tool(label)`, which needs a person's confirmation (ADK's
  tool confirmation: a ticket); once confirmed it runs (its side effect counted), then the model
  replies `done <label>`.

Gates (`gate=<point>`): after_call (the call event is committed), in_tool (the side effect is
done, its response not stored), after_response (the tool's response is committed), after_reply
(the final reply is committed, the turn not yet closed), after_ticket (the long-running tool's
pending answer is committed, the ticket open), after_answer (a person's final answer to the
ticket is committed, the first event of the turn that carries it; the agent not run on it yet),
after_error (the error event of a tool that raised is committed), in_model (the first model call
is in flight). At a gate the run writes
`reached-<label>-<point>` in ADKWEB_TEST_GATE_DIR, then blocks until killed (ADKWEB_TEST_GATE_MODE=block, the worker
subprocess) or raises SimulatedCrash (in-process tests). Each gate stops a run once per label.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from django.db import transaction
from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools import FunctionTool, LongRunningFunctionTool
from google.genai import types

from agents_app.session_service import register_event_hook
from agents_app.tools import idempotency_key

APP_NAME = "crashy_agent"
DOTTED = "tests.engine_scenarios.crashy.crashy_agent"
COMMAND_RE = re.compile(r"^(work|slow|signoff|boom|confirm) (\S+)(?: gate=(\w+))?$")


class SimulatedCrash(BaseException):  # noqa: N818  a BaseException: nothing in the engine may catch it
    """The in-process stand-in for SIGKILL at a gate."""


def gate_dir() -> Path:
    path = Path(os.environ.get("ADKWEB_TEST_GATE_DIR", "/tmp/adkweb-crashy"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def executions() -> list[tuple[str, str, str]]:
    """(tool, label, idempotency key) for every execution so far, in order."""
    log = gate_dir() / "executions.log"
    if not log.exists():
        return []
    return [tuple(line.split("\t")) for line in log.read_text().splitlines() if line]  # type: ignore[misc]


def end_of_turn_lost(session_pk: int, turn_pk: int) -> None:
    """What the database recovers when a turn's end (`done_next`, which commits without waiting for
    the disk: agents_app.turn_sql, turn_sqlite) did not reach it: the turn still running under the
    dead drain's lease (run out by now), the status running, a next turn still queued; every event
    of the turn kept (synchronous commits before it)."""
    from datetime import timedelta

    from django.utils import timezone

    from agents_app.models import AdkSession, Turn

    with transaction.atomic():
        Turn.objects.filter(pk=turn_pk).update(status=Turn.Status.RUNNING, finished_at=None)
        AdkSession.objects.filter(pk=session_pk).update(
            lease_owner="a-drain-whose-end-was-lost",
            lease_expires_at=timezone.now() - timedelta(seconds=1),
            status="running",
        )


def model_calls() -> list[str]:
    log = gate_dir() / "model.log"
    return log.read_text().splitlines() if log.exists() else []


def _record(name: str, line: str) -> None:
    with open(gate_dir() / name, "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def _gate(label: str, point: str) -> None:
    once = gate_dir() / f"blocked-{label}-{point}"
    if once.exists():
        return
    once.touch()
    (gate_dir() / f"reached-{label}-{point}").touch()
    if os.environ.get("ADKWEB_TEST_GATE_MODE") == "block":
        while True:  # until SIGKILL
            time.sleep(1)
    raise SimulatedCrash(f"{label} stopped at {point}")


# -- tools --------------------------------------------------------------------------------------
def side_effect(label: str, gate: str, tool_context: Any) -> dict:
    """Do the work once."""
    _record("executions.log", f"side_effect\t{label}\t{idempotency_key(tool_context)}")
    if gate == "in_tool":  # the side effect happened, its response is not stored yet
        _gate(label, gate)
    return {"label": label, "gate": gate, "status": "done"}


def slow_tool(label: str, gate: str, tool_context: Any) -> dict:
    """Do slow work once."""
    time.sleep(float(os.environ.get("ADKWEB_TEST_SLOW_SECONDS", "4")))
    _record("executions.log", f"slow_tool\t{label}\t{idempotency_key(tool_context)}")
    return {"label": label, "gate": gate, "status": "done"}


def request_signoff(label: str, gate: str, tool_context: Any) -> dict:
    """Ask a human to sign off."""
    _record("executions.log", f"request_signoff\t{label}\t{idempotency_key(tool_context)}")
    return {"label": label, "gate": gate, "status": "pending"}


def guarded_tool(label: str, gate: str, tool_context: Any) -> dict:
    """Do work a person confirmed, once."""
    _record("executions.log", f"guarded_tool\t{label}\t{idempotency_key(tool_context)}")
    if gate == "in_tool":  # the side effect happened, its response is not stored yet
        _gate(label, gate)
    return {"label": label, "gate": gate, "status": "done"}


def broken_tool(label: str, gate: str, tool_context: Any) -> dict:
    """Work that fails."""
    _record("executions.log", f"broken_tool\t{label}\t{idempotency_key(tool_context)}")
    raise RuntimeError(f"broken {label}")


TOOLS = {"work": "side_effect", "slow": "slow_tool", "signoff": "request_signoff", "boom": "broken_tool"}
TOOLS |= {"confirm": "guarded_tool"}


# -- the model ----------------------------------------------------------------------------------
class CrashyLlm(BaseLlm):
    model: str = "crashy"

    async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False) -> AsyncGenerator:
        first = next(c for c in llm_request.contents if c.role == "user" and any(p.text for p in c.parts or []))
        verb, label, gate = COMMAND_RE.match("".join(p.text or "" for p in first.parts or [])).groups()
        gate = gate or ""
        responses = [p.function_response for c in llm_request.contents for p in c.parts or [] if p.function_response]
        _record("model.log", f"{label}\t{len(responses)}")
        if gate == "in_model" and not responses:
            _gate(label, gate)
        if not responses:
            call = types.FunctionCall(id=f"call-{label}", name=TOOLS[verb], args={"label": label, "gate": gate})
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))
            return
        last = responses[-1].response or {}
        word = {"pending": "waiting"}.get(last.get("status"), "signed" if verb == "signoff" else "done")
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=f"{word} {label}")]))


# -- gates on stored events ---------------------------------------------------------------------
def _hook(session: Any, stored: Any, event: Any) -> None:
    if session.app_name != APP_NAME:
        return
    point = label = None
    for fc in event.get_function_calls():
        if (fc.args or {}).get("gate") == "after_call":
            point, label = "after_call", fc.args["label"]
    for fr in event.get_function_responses():
        body = fr.response or {}
        if event.author != "user" and body.get("gate") in ("after_response", "after_ticket"):
            point, label = body["gate"], body["label"]
    final = [fr for fr in event.get_function_responses() if fr.will_continue is not True]  # not an update
    if event.author == "user" and final and "gate=after_answer" in _first_text(session):
        point, label = "after_answer", _first_text(session).split()[1]
    if event.author != "user" and (event.error_code or _has_text(event)):
        first = _first_text(session)
        for wanted in ("after_error", "after_reply"):
            if f"gate={wanted}" in first and (event.error_code if wanted == "after_error" else _has_text(event)):
                point, label = wanted, first.split()[1]
    if point:
        transaction.on_commit(lambda: _gate(label, point))  # not robust: the crash must escape


def _has_text(event: Any) -> bool:
    return bool(event.content and any(p.text for p in event.content.parts or []))


def _first_text(session: Any) -> str:
    from agents_app.models import StoredEvent

    for data in (
        StoredEvent.objects.filter(session=session, author="user").order_by("id").values_list("data", flat=True)
    ):
        for part in (data.get("content") or {}).get("parts", []):
            if part.get("text"):
                return part["text"]
    return ""


# Only the crashy agent's events: a hook that wanted every event would send every other agent's
# appends in this process down the store's thread path (after it was imported by any test).
register_event_hook(_hook, wants=lambda event, session: session.app_name == APP_NAME)

crashy_agent = LlmAgent(
    name=APP_NAME,
    model=CrashyLlm(),
    instruction="Do as scripted.",
    tools=[
        FunctionTool(side_effect),
        FunctionTool(slow_tool),
        LongRunningFunctionTool(request_signoff),
        FunctionTool(broken_tool),
        FunctionTool(guarded_tool, require_confirmation=True),
    ],
)
