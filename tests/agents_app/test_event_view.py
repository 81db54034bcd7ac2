"""timeline.event_view reads stored event JSON directly (no pydantic validation of every event a page
shows) and gives what ADK's own Event would: every kind of part, long-running calls with their
tickets, errors, camelCase JSON too."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from google.adk.events.event import Event
from google.genai import types

from agents_app import timeline
from agents_app.session_service import event_to_json


def _reference(data: dict, tickets: dict) -> list[tuple]:
    """The items as the view was built before, from a validated ADK Event."""
    event = Event.model_validate(data)
    long_running = set(event.long_running_tool_ids or ())
    out = []
    for part in event.content.parts if event.content and event.content.parts else []:
        if part.function_call:
            fc = part.function_call
            out.append(("call", fc.name, fc.id, dict(fc.args or {}), fc.id in long_running, tickets.get(fc.id or "")))
        elif part.function_response:
            fr = part.function_response
            out.append(("response", fr.name, fr.id, fr.response, False, None))
        elif part.text:
            out.append(("text", part.text, bool(part.thought)))
        elif part.executable_code:
            out.append(("code", part.executable_code.code))
        elif part.code_execution_result:
            out.append(("code", part.code_execution_result.output))
        else:
            out.append(("other", part.model_dump(mode="json", exclude_none=True)))
    return out


def _items(view: timeline.EventView) -> list[tuple]:
    out = []
    for i in view.items:
        if i.kind in ("call", "response"):
            out.append((i.kind, i.name, i.call_id, i.data, i.long_running, i.ticket))
        elif i.kind == "text":
            out.append(("text", i.text, i.thought))
        elif i.kind == "code":
            out.append(("code", i.text))
        else:
            out.append(("other", i.data))
    return out


PARTS = [
    types.Part(text="Hello there"),
    types.Part(text="thinking…", thought=True),
    types.Part(function_call=types.FunctionCall(id="c1", name="ask_for_approval", args={"amount": 200.0})),
    types.Part(function_call=types.FunctionCall(id="c2", name="lookup", args={})),
    types.Part(function_response=types.FunctionResponse(id="c0", name="lookup", response={"price": 1.5})),
    types.Part(executable_code=types.ExecutableCode(code="print(1)", language="PYTHON")),
    types.Part(code_execution_result=types.CodeExecutionResult(outcome="OUTCOME_OK", output="1\n")),
    types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG")),
]


@pytest.mark.parametrize("camel", [False, True])
def test_the_view_is_what_adks_event_gives_without_validating_it(monkeypatch, camel):
    event = Event(
        author="reimbursement_agent",
        invocation_id="inv-1",
        content=types.Content(role="model", parts=PARTS),
        long_running_tool_ids={"c1"},
        error_code="MALFORMED",
        error_message="the model stopped <early>",
    )
    data = event.model_dump(mode="json", exclude_none=True, by_alias=True) if camel else event_to_json(event)
    tickets = {"c1": SimpleNamespace(pk=7)}
    expected = _reference(data, tickets)
    monkeypatch.setattr(Event, "model_validate", lambda *a, **k: pytest.fail("validated an event to show it"))
    view = timeline.event_view(SimpleNamespace(data=data, pk=3, timestamp=event.timestamp), tickets)
    assert _items(view)[:-1] == expected[:-1]
    stored_part = data["content"]["parts"][-1]  # anything else: shown as stored (ADK's spelling, or the wire's)
    assert view.items[-1].data == (stored_part if camel else expected[-1][1])
    assert [i.kind for i in view.items] == ["text", "text", "call", "call", "response", "code", "code", "other"]
    assert (view.event_id, view.author, view.pk) == (event.id, "reimbursement_agent", 3)
    assert (view.error_code, view.error_message, view.is_error) == ("MALFORMED", "the model stopped <early>", True)
    assert view.items[2].long_running and view.items[2].ticket.pk == 7 and not view.items[3].long_running


def test_an_event_without_content_has_no_items():
    data = event_to_json(Event(author="user", invocation_id="inv-2", actions={"state_delta": {"k": 1}}))
    view = timeline.event_view(SimpleNamespace(data=data, pk=1, timestamp=1.0), {})
    assert view.items == [] and view.is_user and not view.is_error


@pytest.mark.parametrize("zone", ["UTC", "Europe/Paris"])
def test_the_cards_time_is_what_the_date_filters_wrote(zone):
    from django.template import Context, Template
    from django.utils import timezone

    filters = Template(
        "<time datetime=\"{{ t|date:'c' }}\" title=\"{{ t|date:'Y-m-d H:i:s T' }}\">{{ t|time:'H:i:s' }}</time>"
    )
    with timezone.override(zone):
        for ts in (1788217922.0191069, 1788217922.0):
            view = timeline.EventView(event_id="e", author="a", timestamp=timeline._dt(ts))
            assert view.time_html == filters.render(Context({"t": view.timestamp}))
    assert timeline.EventView(event_id="e", author="a").time_html == ""
