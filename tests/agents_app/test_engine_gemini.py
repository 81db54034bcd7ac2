"""The Gemini path: ADK's real `Gemini` model and google-genai client, talking to a local server
that speaks the generateContent protocol (never the internet), through the real worker."""

import pytest

from agents_app import services
from agents_app.models import AgentConfig
from tests.engine_scenarios import agent_texts, calls, dialogue, failed_turns, responses, settle
from tests.gemini_server import GeminiServer, function_call_reply, text_reply


@pytest.fixture
def gemini(settings, monkeypatch):
    monkeypatch.setenv("GOOGLE_API_KEY", "dummy-test-key")
    for name in ("GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT", "GOOGLE_GEMINI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    replies = [function_call_reply("get_stock_price", {"symbol": "GOOG"}), text_reply("GOOG trades at $178.42.")]
    with GeminiServer(replies) as server:
        settings.GEMINI_BASE_URL = server.base_url
        AgentConfig.objects.create(
            name="gemini_stock_agent",
            model="gemini-2.5-flash",
            tools=["get_stock_price"],
            instruction="You retrieve stock prices.",
        )
        yield server


@pytest.mark.parametrize("streaming", [False, True], ids=["generateContent", "streamGenerateContent"])
def test_a_gemini_agent_runs_a_tool_and_answers(demo, worker, wait, gemini, streaming):
    session = services.session_create(app_name="gemini_stock_agent", user_id="requester")
    services.message_send(session=session, text="What is GOOG at?", actor=demo["requester"], streaming=streaming)
    settle(session, wait)
    assert failed_turns(session) == []

    method = "streamGenerateContent" if streaming else "generateContent"
    assert [r["path"].split("?")[0] for r in gemini.requests] == [f"/v1beta/models/gemini-2.5-flash:{method}"] * 2
    assert {r["api_key"] for r in gemini.requests} == {"dummy-test-key"}
    first, second = (r["body"] for r in gemini.requests)
    [decl] = [d for tool in first["tools"] for d in tool["functionDeclarations"]]
    assert decl["name"] == "get_stock_price" and "symbol" in str(decl)
    assert first["contents"][-1] == {"role": "user", "parts": [{"text": "What is GOOG at?"}]}
    assert "You retrieve stock prices." in str(first["systemInstruction"])
    # The second request carries the tool's (wrapped) result back to the model.
    fr = second["contents"][-1]["parts"][0]["functionResponse"]
    assert (fr["name"], fr["response"]) == ("get_stock_price", {"result": 178.42})

    assert [c["args"] for c in calls(session, "get_stock_price")] == [{"symbol": "GOOG"}]
    assert responses(session, "get_stock_price")[0][1]["response"] == {"result": 178.42}
    assert agent_texts(session) == ["GOOG trades at $178.42."]
    assert dialogue(session)[0] == ("user", "What is GOOG at?")
