"""Scenarios about the turn inbox itself: order, one run at a time, failures, tool results."""

from __future__ import annotations

from itertools import pairwise

from agents_app import services
from agents_app.models import Turn
from approvals.models import PendingCall

from . import Wait, agent_texts, calls, dialogue, failed_turns, responses, settle, texts
from .flaky import APP_NAME as FLAKY_APP


def queued_messages_run_in_order_one_at_a_time(demo: dict, wait: Wait) -> None:
    session = services.session_create(app_name="stock_agent", user_id="requester")
    symbols = ["GOOG", "AAPL", "MSFT", "NVDA"]
    for symbol in symbols:  # quicker than a turn: they queue behind the first
        services.message_send(session=session, text=f"What is the price of {symbol}?", actor=demo["requester"])
    settle(session, wait)
    assert failed_turns(session) == []
    assert texts(session, author="user") == [f"What is the price of {s}?" for s in symbols]
    prices = {"GOOG": "$178.42", "AAPL": "$229.87", "MSFT": "$431.05", "NVDA": "$142.61"}
    assert agent_texts(session) == [f"The current price of {s} is {prices[s]}." for s in symbols]
    turns = list(Turn.objects.filter(session=session).order_by("id"))
    assert [t.status for t in turns] == ["done"] * len(symbols)
    for earlier, later in pairwise(turns):
        assert earlier.finished_at <= later.started_at, "two runs of one session overlapped"
    # Each answer follows its own question: the stored conversation alternates.
    assert dialogue(session) == [
        pair
        for s in symbols
        for pair in (
            ("user", f"What is the price of {s}?"),
            ("stock_agent", f"The current price of {s} is {prices[s]}."),
        )
    ]


def stock_price_is_wrapped_as_result(demo: dict, wait: Wait) -> None:
    session = services.session_create(app_name="stock_agent", user_id="requester")
    services.message_send(session=session, text="What is the price of GOOG?", actor=demo["requester"])
    settle(session, wait)
    [(author, fr)] = responses(session, "get_stock_price")
    assert author == "stock_agent"
    assert fr["response"] == {"result": 178.42}
    assert agent_texts(session)[-1] == "The current price of GOOG is $178.42."


def agent_tool_answer_ends_the_parents_turn(demo: dict, wait: Wait) -> None:
    session = services.session_create(app_name="assistant_agent", user_id="requester")
    text = "The quarterly numbers are up and the team shipped the new billing system on time"
    services.message_send(session=session, text=text, actor=demo["requester"])
    settle(session, wait)
    assert failed_turns(session) == []
    summary = "Summary (15 words): The quarterly numbers are up and the team shipped the new billing…"
    [call] = calls(session)
    assert (call["name"], call["args"]) == ("summary_agent", {"request": text})
    [(author, fr)] = responses(session, "summary_agent")
    assert author == "assistant_agent" and fr["response"] == {"result": summary}
    # skip_summarization: the child's answer is the parent's last word; the parent's model is not asked again.
    assert agent_texts(session) == [summary]
    assert not PendingCall.objects.filter(session=session).exists()


def failed_turn_is_recorded_and_the_next_message_runs(demo: dict, wait: Wait) -> None:
    session = services.session_create(app_name=FLAKY_APP, user_id="requester")
    services.message_send(session=session, text="order 7 boom", actor=demo["requester"])
    settle(session, wait)
    [(_, error)] = failed_turns(session)
    assert error == "RuntimeError: order system is down"
    services.message_send(session=session, text="order 8", actor=demo["requester"])
    settle(session, wait)
    assert [t.status for t in Turn.objects.filter(session=session).order_by("id")] == ["failed", "done"]
    assert agent_texts(session)[-1] == 'lookup_order returned {"order": "order 8", "status": "found"}.'
