"""agents_app.api.render.stored_event_json: a published event's stored JSON text as ADK's REST JSON, the
same as event_json gives (ADK's credential redaction included), with the redaction walk skipped only
where it changes nothing."""

from __future__ import annotations

import json

import pytest
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.genai import types

from agents_app.api import render
from agents_app.event_json import event_json_text

SECRET = "s3cret-value"


def _call(name: str, args: dict) -> Event:
    part = types.Part(function_call=types.FunctionCall(id="c1", name=name, args=args))
    return Event(author="agent", invocation_id="i", content=types.Content(role="model", parts=[part]))


def _response(name: str, response: dict) -> Event:
    part = types.Part(function_response=types.FunctionResponse(id="c1", name=name, response=response))
    return Event(author="agent", invocation_id="i", content=types.Content(role="user", parts=[part]))


def _auth_config() -> dict:
    return {
        "auth_scheme": {"type": "apiKey", "in": "header", "name": "X-Key"},
        "raw_auth_credential": {"auth_type": "apiKey", "api_key": SECRET},
    }


PLAIN = [
    Event(author="agent", invocation_id="i", content=types.Content(role="model", parts=[types.Part(text="hello")])),
    _call("ask_for_approval", {"purpose": "meals", "amount": 200.0}),
    _response("ask_for_approval", {"status": "pending", "ticket-id": "t-1", "token_count": 3}),
    Event(author="agent", invocation_id="i", actions=EventActions(state_delta={"k": "v"}, end_of_agent=True)),
]
WITH_SECRETS = [
    _call("adk_request_credential", {"functionCallId": "c0", "authConfig": _auth_config()}),
    _call("some_tool", {"authType": "apiKey", "apiKey": SECRET}),
    _response("some_tool", {"rawAuthCredential": {"authType": "apiKey", "apiKey": SECRET}}),
    Event(
        author="agent",
        invocation_id="i",
        actions=EventActions(requested_auth_configs={"c0": _auth_config()}),  # type: ignore[dict-item]
    ),
]


@pytest.mark.parametrize("event", PLAIN, ids=range(len(PLAIN)))
def test_an_event_without_credentials_skips_the_redaction_walk_and_reads_the_same(event, monkeypatch):
    text = event_json_text(event)
    expected = render.event_json(json.loads(text))
    assert not render.redaction_needed(text)
    walked: list[object] = []
    monkeypatch.setattr(render, "_redact", lambda value: walked.append(value) or value)
    assert render.stored_event_json(text) == expected
    assert walked == []


@pytest.mark.parametrize("event", WITH_SECRETS, ids=range(len(WITH_SECRETS)))
def test_an_event_with_credentials_is_redacted_as_event_json_redacts_it(event):
    text = event_json_text(event)
    assert SECRET in text and render.redaction_needed(text)
    rest = render.stored_event_json(text)
    assert rest == render.event_json(json.loads(text))
    assert SECRET not in json.dumps(rest)
