"""Answers reach the agent exactly as sent, and each model backend gets only the fields it takes.

A code-defined agent on ADK's real `Gemini` model and the real google-genai client, in Vertex AI
mode (vertexai=True, a project and a location) and in Gemini Developer API mode, both pointed at
the local protocol server (tests/gemini_server.py). The agent pauses on a long-running tool; an
intermediate answer then a final one resume it, built by adkweb (approver actions) or sent by a
client as ADK JSON (the /run body's newMessage).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.oauth2.credentials import Credentials

from agents_app import services
from agents_app.content import content_parse
from agents_app.models import StoredEvent
from approvals import services as approvals
from approvals.answer_turn import PartsWouldWait
from approvals.models import Response
from tests.approvals.policy_helpers import policy
from tests.engine_scenarios import failed_turns, settle, ticket_opened
from tests.gemini_server import GeminiServer, function_call_reply, text_reply

agent: Any = None  # set per test: ADKWEB_CODE_AGENTS points here


def _build_agent(mode: str, base_url: str) -> Any:
    from google.adk.agents import LlmAgent
    from google.adk.models.google_llm import Gemini

    from agents_app.tools import registry

    if mode == "vertex":
        # Explicit credentials: no ADC lookup and no token refresh (nothing leaves the machine).
        client = {"vertexai": True, "project": "test-project", "location": "us-central1"}
        client["credentials"] = Credentials(token="test-token")
    else:
        client = {"api_key": "dummy-test-key"}
    return LlmAgent(
        name="backend_agent",
        model=Gemini(model="gemini-2.5-flash", base_url=base_url, client_kwargs=client),
        instruction="Ask for approval, then report.",
        tools=[registry.get("ask_for_approval").build()],
    )


@pytest.fixture
def gemini(settings, monkeypatch, request):
    for name in ("GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    replies = [
        function_call_reply("ask_for_approval", {"purpose": "meals", "amount": 200}),
        text_reply("Your request is pending."),
        text_reply("Still waiting: half done."),
        text_reply("Approved and reimbursed."),
    ]
    with GeminiServer(replies) as server:
        monkeypatch.setattr(f"{__name__}.agent", _build_agent(request.param, server.base_url))
        settings.ADKWEB_CODE_AGENTS = {"backend_agent": f"{__name__}.agent"}
        yield request.param, server


def _answer(ticket: Any, actor: Any, via: str, final: bool) -> None:
    if via == "approver":
        if final:
            approvals.ticket_approve(ticket=ticket, actor=actor)
        else:
            approvals.ticket_update(ticket=ticket, actor=actor, message="half done", progress=0.5)
        return
    fr: dict[str, Any] = {"id": ticket.call_id, "name": ticket.call_name, "response": {"status": "approved"}}
    if not final:
        fr.update(response={"status": "in_progress", "progress": 0.5}, willContinue=True)
    content = content_parse({"role": "user", "parts": [{"functionResponse": fr}]})
    approvals.message_submit(session=ticket.session, content=content, actor=actor)


def _last_function_response(request: dict) -> dict:
    return request["body"]["contents"][-1]["parts"][0]["functionResponse"]


def _stored_user_answers(session: Any) -> list[dict]:
    events = StoredEvent.objects.filter(session=session, author="user").order_by("timestamp", "id")
    return [p["function_response"] for e in events for p in e.data["content"]["parts"] if "function_response" in p]


@pytest.mark.parametrize("gemini", ["vertex", "gemini_api"], indirect=True)
@pytest.mark.parametrize("via", ["approver", "client"])
def test_intermediate_then_final_answer_resume_the_agent_on_each_backend(demo, worker, wait, gemini, via):
    mode, server = gemini
    session = services.session_create(app_name="backend_agent", user_id="requester")
    services.message_send(session=session, text="Please reimburse 200$ for meals", actor=demo["requester"])
    ticket = ticket_opened(session, wait)

    _answer(ticket, demo["approver"], via, final=False)
    settle(session, wait)
    _answer(ticket, demo["approver"], via, final=True)
    settle(session, wait)

    assert failed_turns(session) == [], "every resume reached the model and came back"
    assert len(server.requests) == 4
    if mode == "vertex":
        vertex_path = "/projects/test-project/locations/us-central1/publishers/google/"
        assert all(vertex_path in r["path"] for r in server.requests)
        assert {r["authorization"] for r in server.requests} == {"Bearer test-token"}
        # Vertex AI refuses the field (True or False): no request carries it, history included.
        assert not any("will_continue" in json.dumps(r["body"]) for r in server.requests)
    else:
        assert all(r["path"].startswith("/v1beta/models/") for r in server.requests)
        intermediate = _last_function_response(server.requests[2])
        assert intermediate["will_continue"] is True, "the Gemini Developer API gets the intermediate flag"
    final = _last_function_response(server.requests[3])
    assert final == {"id": ticket.call_id, "name": "ask_for_approval", "response": {"status": "approved"}}

    # The session keeps each answer as it was sent: the final one without will_continue.
    stored_intermediate, stored_final = _stored_user_answers(session)
    assert stored_intermediate["will_continue"] is True
    assert stored_final == {"id": ticket.call_id, "name": "ask_for_approval", "response": {"status": "approved"}}
    ticket.refresh_from_db()
    assert ticket.status == "approved"


@pytest.mark.parametrize("gemini", ["gemini_api"], indirect=True)
def test_a_clients_answer_reaches_the_model_with_every_part_of_its_message(demo, worker, wait, gemini):
    """ADK's runner takes a /run message whole: a file or an image beside the function response (a
    receipt sent with the approval), the function response's own parts (a multimodal response), its
    scheduling and every key of its response. adkweb built the turn from the function responses alone,
    so the parts beside them never reached the agent."""
    _mode, server = gemini
    session = services.session_create(app_name="backend_agent", user_id="requester")
    services.message_send(session=session, text="Please reimburse 200$ for meals", actor=demo["requester"])
    ticket = ticket_opened(session, wait)
    receipt = {"inlineData": {"mimeType": "image/png", "data": "cmVjZWlwdA=="}}
    fr = {
        "id": ticket.call_id,
        "name": ticket.call_name,
        "response": {"status": "approved", "note": "receipt attached", "lines": [{"meals": 200}]},
        "parts": [{"inlineData": {"mimeType": "image/png", "data": "c3RhbXA=", "displayName": "stamp"}}],
        "scheduling": "WHEN_IDLE",
    }
    content = content_parse({"role": "user", "parts": [{"functionResponse": fr}, receipt]})
    approvals.message_submit(session=ticket.session, content=content, actor=demo["approver"])
    settle(session, wait)

    assert failed_turns(session) == []
    sent = server.requests[2]["body"]["contents"][-1]["parts"]
    assert [sorted(p) for p in sent] == [["functionResponse"], ["inlineData"]], sent
    assert sent[1]["inlineData"]["data"] == "cmVjZWlwdA==", sent
    answer = sent[0]["functionResponse"]
    assert answer["response"] == fr["response"] and answer["scheduling"] == "WHEN_IDLE", answer
    assert len(answer["parts"]) == 1 and {"c3RhbXA=", "stamp"} <= set(json.dumps(answer["parts"]).split('"')), answer
    ticket.refresh_from_db()
    assert ticket.status == "approved"


@pytest.mark.parametrize("gemini", ["gemini_api"], indirect=True)
def test_a_held_approval_with_a_file_beside_it_is_refused_and_the_model_hears_the_quorums_answer(
    demo, worker, wait, gemini
):
    """An approval held for a quorum reaches the agent with the quorum's last one, as that turn is built
    (the last approver's answer alone): a file sent beside the held one would never reach the model. The
    message is refused, nothing recorded; sent alone, the approval is held, and the model hears the
    quorum's answer once."""
    _mode, server = gemini
    policy("two", tool="ask_for_approval", required_approvals=2, priority=50)
    session = services.session_create(app_name="backend_agent", user_id="requester")
    services.message_send(session=session, text="Please reimburse 200$ for meals", actor=demo["requester"])
    ticket = ticket_opened(session, wait)
    assert ticket.required_approvals == 2
    fr = {"functionResponse": {"id": ticket.call_id, "name": ticket.call_name, "response": {"status": "approved"}}}
    receipt = {"inlineData": {"mimeType": "image/png", "data": "cmVjZWlwdA=="}}

    with_file = content_parse({"role": "user", "parts": [fr, receipt]})
    with pytest.raises(PartsWouldWait, match="would not reach it"):
        approvals.message_submit(session=ticket.session, content=with_file, actor=demo["approver"])
    assert not Response.objects.filter(pending_call=ticket).exists()
    alone = content_parse({"role": "user", "parts": [fr]})
    assert approvals.message_submit(session=ticket.session, content=alone, actor=demo["approver"]) is None  # held
    approvals.ticket_approve(ticket=ticket, actor=demo["approver2"])
    settle(session, wait)

    assert failed_turns(session) == [] and len(server.requests) == 3
    assert server.requests[2]["body"]["contents"][-1]["parts"] == [
        {"functionResponse": {"id": ticket.call_id, "name": "ask_for_approval", "response": {"status": "approved"}}}
    ]
    ticket.refresh_from_db()
    assert ticket.status == "approved"
