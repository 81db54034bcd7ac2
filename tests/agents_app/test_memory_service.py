"""ADK memory on Django models, held to what ADK's own in-memory service does: one parametrised
module, both services, the same answers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from google.adk.events.event import Event
from google.adk.memory import InMemoryMemoryService
from google.adk.sessions.session import Session
from google.genai import types

from agents_app.memory import DjangoMemoryService


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.fixture(params=["adk-in-memory", "django"])
def memory(request, transactional_db) -> Any:
    return InMemoryMemoryService() if request.param == "adk-in-memory" else DjangoMemoryService()


def _event(author: str, text: str | None, ts: float) -> Event:
    content = (
        types.Content(role="user" if author == "user" else "model", parts=[types.Part(text=text)]) if text else None
    )
    return Event(author=author, content=content, timestamp=ts)


def _session(sid: str, *texts: tuple[str, str | None], user: str = "u1") -> Session:
    events = [_event(a, t, 1_700_000_000 + i) for i, (a, t) in enumerate(texts)]
    return Session(id=sid, app_name="app", user_id=user, events=events)


def _found(memory: Any, query: str, user: str = "u1") -> list[tuple[str | None, str]]:
    res = run(memory.search_memory(app_name="app", user_id=user, query=query))
    return [(m.author, m.content.parts[0].text) for m in res.memories]


def test_search_finds_the_users_events_best_match_first(memory):
    s1 = _session("s1", ("user", "My favourite city is Lisbon"), ("agent", "Noted: Lisbon."), ("agent", None))
    s2 = _session("s2", ("user", "I like the city of Porto too"))
    run(memory.add_session_to_memory(s1))
    run(memory.add_session_to_memory(s2))
    run(memory.add_session_to_memory(_session("s3", ("user", "Lisbon is mine"), user="u2")))
    assert _found(memory, "Which city is my favourite?") == [
        ("user", "My favourite city is Lisbon"),
        ("user", "I like the city of Porto too"),
    ]
    assert _found(memory, "lisbon") == [("user", "My favourite city is Lisbon"), ("agent", "Noted: Lisbon.")]
    assert _found(memory, "nothing matches") == []
    res = run(memory.search_memory(app_name="app", user_id="u1", query="Porto"))
    assert res.memories[0].id == s2.events[0].id and res.memories[0].timestamp.startswith("2023-11-14T")


def test_adding_a_session_again_replaces_its_memories(memory):
    run(memory.add_session_to_memory(_session("s1", ("user", "alpha beta"))))
    run(memory.add_session_to_memory(_session("s1", ("user", "gamma"))))
    assert _found(memory, "alpha") == [] and _found(memory, "gamma") == [("user", "gamma")]


def test_deleted_memories_are_not_added_again(memory):
    session = _session("s1", ("user", "secret plan"), ("agent", "plan noted"))
    run(memory.add_session_to_memory(session))
    run(memory.delete_memory(app_name="app", user_id="u1", memory_id=session.events[0].id))
    assert _found(memory, "plan") == [("agent", "plan noted")]
    run(memory.add_session_to_memory(session))
    assert _found(memory, "plan") == [("agent", "plan noted")]


def test_add_events_appends_only_events_new_to_that_session(memory):
    first = _event("user", "hello world", 1_700_000_000)
    run(memory.add_events_to_memory(app_name="app", user_id="u1", events=[first], session_id="s1"))
    run(memory.add_events_to_memory(app_name="app", user_id="u1", events=[first], session_id="s1"))
    assert _found(memory, "world") == [("user", "hello world")]
    # Without a session id, events go to one "unknown session" (ADK keeps the same event there too).
    run(memory.add_events_to_memory(app_name="app", user_id="u1", events=[first, _event("user", "world", 2e9)]))
    assert _found(memory, "world") == [("user", "hello world"), ("user", "hello world"), ("user", "world")]


def test_at_most_ten_memories(memory):
    run(memory.add_session_to_memory(_session("s1", *[("user", f"note {i}") for i in range(15)])))
    assert len(_found(memory, "note")) == 10
