"""The ADK session service contract, run against ADK's InMemorySessionService and ours.

Mirrors google/adk-python tests/unittests/sessions/test_session_service.py: one module, one
fixture parametrised over every backend, so DjangoSessionService behaves as ADK's own services do.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.genai import types

APP = "my_app"


# The Django ORM runs in sync_to_async's thread: it must see committed data (transaction=True).
BACKENDS = ["in_memory", pytest.param("django", marks=pytest.mark.django_db(transaction=True))]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The backend's name."""
    return request.param


@pytest.fixture
async def session_service(backend: str) -> AsyncIterator[BaseSessionService]:
    """A fresh session service of each backend."""
    if backend == "in_memory":
        yield InMemorySessionService()
        return
    from asgiref.sync import sync_to_async
    from django.db import connections

    from agents_app.session_service import DjangoSessionService

    yield DjangoSessionService()
    # Close the ORM thread's connection so the test database can be flushed and dropped.
    await sync_to_async(connections.close_all)()


def _event(state_delta: dict | None = None, **kwargs) -> Event:
    """A user event, optionally carrying a state delta."""
    kwargs.setdefault("invocation_id", "inv")
    kwargs.setdefault("author", "user")
    return Event(actions=EventActions(state_delta=state_delta or {}), **kwargs)


async def test_get_missing_session_returns_none(session_service):
    assert await session_service.get_session(app_name=APP, user_id="u", session_id="123") is None


async def test_create_get_delete_session(session_service):
    session = await session_service.create_session(app_name=APP, user_id="u", state={"key": "value"})
    assert (session.app_name, session.user_id, session.state, session.events) == (APP, "u", {"key": "value"}, [])
    assert session.id
    got = await session_service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert got == session
    await session_service.delete_session(app_name=APP, user_id="u", session_id=session.id)
    assert await session_service.get_session(app_name=APP, user_id="u", session_id=session.id) is None


async def test_generated_ids_are_unique_and_given_ids_are_kept(session_service):
    a = await session_service.create_session(app_name=APP, user_id="u")
    b = await session_service.create_session(app_name=APP, user_id="u")
    c = await session_service.create_session(app_name=APP, user_id="u", session_id="chosen")
    assert a.id != b.id and c.id == "chosen"


async def test_duplicate_session_id_raises_already_exists(session_service):
    await session_service.create_session(app_name=APP, user_id="u", session_id="dup", state={"k": 1})
    with pytest.raises(AlreadyExistsError):
        await session_service.create_session(app_name=APP, user_id="u", session_id="dup", state={"k": 2})
    got = await session_service.get_session(app_name=APP, user_id="u", session_id="dup")
    assert got.state == {"k": 1}
    # The same id for another user is another session.
    other = await session_service.create_session(app_name=APP, user_id="u2", session_id="dup")
    assert other.user_id == "u2"


async def test_list_sessions_for_a_user_and_for_all_users(session_service):
    for user_id, sid in [("u1", "s1a"), ("u1", "s1b"), ("u2", "s2a")]:
        await session_service.create_session(app_name=APP, user_id=user_id, session_id=sid, state={"key": sid})
    await session_service.create_session(app_name="other_app", user_id="u1", session_id="elsewhere")
    one = (await session_service.list_sessions(app_name=APP, user_id="u1")).sessions
    assert sorted(s.id for s in one) == ["s1a", "s1b"]
    everyone = (await session_service.list_sessions(app_name=APP, user_id=None)).sessions
    assert {(s.user_id, s.id, s.state["key"]) for s in everyone} == {
        ("u1", "s1a", "s1a"),
        ("u1", "s1b", "s1b"),
        ("u2", "s2a", "s2a"),
    }
    assert (await session_service.list_sessions(app_name=APP, user_id="nobody")).sessions == []


async def test_list_sessions_has_no_events_and_is_ordered_by_update_time(session_service):
    first = await session_service.create_session(app_name=APP, user_id="u", session_id="first")
    await session_service.create_session(app_name=APP, user_id="u", session_id="second", state={"user:x": 1})
    await session_service.append_event(first, _event({"k": "v"}, timestamp=first.last_update_time + 100))
    sessions = (await session_service.list_sessions(app_name=APP, user_id="u")).sessions
    assert [s.id for s in sessions] == ["second", "first"]
    assert all(s.events == [] for s in sessions)
    assert sessions[1].state == {"k": "v", "user:x": 1}


async def test_state_is_split_by_prefix_and_temp_is_never_stored(session_service):
    s11 = await session_service.create_session(
        app_name=APP, user_id="u1", session_id="s11", state={"key11": "v11", "temp:init": "gone"}
    )
    assert "temp:init" not in s11.state
    await session_service.create_session(app_name=APP, user_id="u1", session_id="s12", state={"key12": "v12"})
    await session_service.create_session(app_name=APP, user_id="u2", session_id="s2")
    delta = {"app:key": "app", "user:key1": "user", "temp:key": "temp", "key11": "new"}
    await session_service.append_event(s11, _event(delta))

    # The caller's copy sees everything, temp included, for the rest of the invocation...
    assert s11.state == {"key11": "new", "app:key": "app", "user:key1": "user", "temp:key": "temp"}
    # ...but the event that is kept has no temp key, and nothing temp reaches storage.
    assert "temp:key" not in s11.events[-1].actions.state_delta
    s11 = await session_service.get_session(app_name=APP, user_id="u1", session_id="s11")
    assert s11.state == {"key11": "new", "app:key": "app", "user:key1": "user"}
    assert s11.events[-1].actions.state_delta == {"app:key": "app", "user:key1": "user", "key11": "new"}
    s12 = await session_service.get_session(app_name=APP, user_id="u1", session_id="s12")
    assert s12.state == {"key12": "v12", "app:key": "app", "user:key1": "user"}
    s2 = await session_service.get_session(app_name=APP, user_id="u2", session_id="s2")
    assert s2.state == {"app:key": "app"}


async def test_app_state_is_shared_by_all_users_of_an_app(session_service):
    s1 = await session_service.create_session(app_name=APP, user_id="u1", session_id="s1", state={"app:k1": "v1"})
    await session_service.append_event(s1, _event({"app:k2": "v2"}))
    s2 = await session_service.create_session(app_name=APP, user_id="u2", session_id="s2")
    assert s2.state == {"app:k1": "v1", "app:k2": "v2"}
    other = await session_service.create_session(app_name="other_app", user_id="u2", session_id="s3")
    assert other.state == {}


async def test_user_state_is_shared_only_by_that_users_sessions(session_service):
    s1 = await session_service.create_session(app_name=APP, user_id="u1", session_id="s1", state={"user:k1": "v1"})
    await session_service.append_event(s1, _event({"user:k2": "v2"}))
    s1b = await session_service.create_session(app_name=APP, user_id="u1", session_id="s1b")
    assert s1b.state == {"user:k1": "v1", "user:k2": "v2"}
    s2 = await session_service.create_session(app_name=APP, user_id="u2", session_id="s2")
    assert s2.state == {}


async def test_session_state_is_not_shared(session_service):
    s1 = await session_service.create_session(app_name=APP, user_id="u1", session_id="s1", state={"sk1": "v1"})
    await session_service.append_event(s1, _event({"sk2": "v2"}))
    got = await session_service.get_session(app_name=APP, user_id="u1", session_id="s1")
    assert got.state == {"sk1": "v1", "sk2": "v2"}
    s1b = await session_service.create_session(app_name=APP, user_id="u1", session_id="s1b")
    assert s1b.state == {}


async def test_get_session_respects_user_id(session_service):
    s1 = await session_service.create_session(app_name=APP, user_id="u1", session_id="s1")
    await session_service.append_event(s1, _event())
    await session_service.create_session(app_name=APP, user_id="u2", session_id="s1")
    got = await session_service.get_session(app_name=APP, user_id="u2", session_id="s1")
    assert got.user_id == "u2" and got.events == []


async def test_get_session_config_num_recent_events_and_after_timestamp(session_service):
    session = await session_service.create_session(app_name=APP, user_id="u")
    for i in range(1, 6):
        await session_service.append_event(session, Event(author="user", timestamp=float(i)))

    async def timestamps(**config) -> list[float]:
        got = await session_service.get_session(
            app_name=APP, user_id="u", session_id=session.id, config=GetSessionConfig(**config) if config else None
        )
        return [e.timestamp for e in got.events]

    assert await timestamps() == [1, 2, 3, 4, 5]
    assert await timestamps(num_recent_events=0) == []
    assert await timestamps(num_recent_events=3) == [3, 4, 5]
    assert await timestamps(num_recent_events=50) == [1, 2, 3, 4, 5]
    assert await timestamps(after_timestamp=4.0) == [4, 5]  # inclusive
    assert await timestamps(after_timestamp=50.0) == []
    assert await timestamps(after_timestamp=4.0, num_recent_events=3) == [4, 5]
    assert await timestamps(after_timestamp=2.0, num_recent_events=2) == [4, 5]


async def test_partial_events_are_never_stored(session_service):
    session = await session_service.create_session(app_name=APP, user_id="u")
    partial = Event(author="agent", partial=True, content=types.Content(role="model", parts=[types.Part(text="He")]))
    assert await session_service.append_event(session, partial) is partial
    assert session.events == []
    got = await session_service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert got.events == []


async def test_append_event_bytes_round_trip(session_service):
    session = await session_service.create_session(app_name=APP, user_id="u")
    content = types.Content(role="user", parts=[types.Part.from_bytes(data=b"\x00\xffimage", mime_type="image/png")])
    grounding = types.GroundingMetadata(search_entry_point=types.SearchEntryPoint(sdk_blob=b"blob"))
    await session_service.append_event(session, _event(content=content, grounding_metadata=grounding))
    got = await session_service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert got.events[0].content == content
    assert got.events[0].grounding_metadata == grounding


async def test_append_event_with_every_field_round_trips(session_service):
    session = await session_service.create_session(app_name=APP, user_id="u")
    event = Event(
        invocation_id="invocation",
        author="agent",
        branch="root.child",
        content=types.Content(role="model", parts=[types.Part(function_call=types.FunctionCall(id="c1", name="t"))]),
        turn_complete=True,
        actions=EventActions(
            artifact_delta={"file": 0},
            transfer_to_agent="agent",
            escalate=True,
            skip_summarization=True,
            state_delta={"k": {"nested": [1, 2.5, None, "x"]}},
        ),
        long_running_tool_ids={"c1", "c0"},
        error_code="error_code",
        error_message="error_message",
        interrupted=True,
        usage_metadata=types.GenerateContentResponseUsageMetadata(prompt_token_count=1, total_token_count=2),
        custom_metadata={"custom_key": "custom_value", "n": 1.5},
        timestamp=1700000000.123456,
        input_transcription=types.Transcription(text="in", finished=True),
    )
    await session_service.append_event(session, event)
    got = await session_service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert got == session
    assert got.events[0].model_dump() == event.model_dump()


async def test_last_update_time_follows_appended_events(session_service):
    session = await session_service.create_session(app_name=APP, user_id="u")
    created = session.last_update_time
    await session_service.append_event(session, _event(timestamp=created + 10))
    assert session.last_update_time == pytest.approx(created + 10, abs=1e-6)
    got = await session_service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert got.last_update_time == pytest.approx(created + 10, abs=1e-6)


async def test_delete_session_removes_its_events(session_service):
    session = await session_service.create_session(app_name=APP, user_id="u", session_id="s")
    await session_service.append_event(session, _event())
    await session_service.delete_session(app_name=APP, user_id="u", session_id="s")
    again = await session_service.create_session(app_name=APP, user_id="u", session_id="s")
    assert again.events == []
    assert (await session_service.get_session(app_name=APP, user_id="u", session_id="s")).events == []
    # Deleting what is not there is not an error.
    await session_service.delete_session(app_name=APP, user_id="u", session_id="never")


async def test_append_to_a_deleted_session_raises_session_not_found(session_service):
    session = await session_service.create_session(app_name=APP, user_id="u", session_id="s")
    await session_service.delete_session(app_name=APP, user_id="u", session_id="s")
    with pytest.raises(SessionNotFoundError):
        await session_service.append_event(session, _event({"k": "v"}))
    assert await session_service.get_session(app_name=APP, user_id="u", session_id="s") is None


async def test_get_user_state(session_service):
    assert await session_service.get_user_state(app_name=APP, user_id="u1") == {}
    session = await session_service.create_session(app_name=APP, user_id="u1")
    await session_service.append_event(session, _event({"user:profile": {"name": "Alice"}, "session_key": 1}))
    await session_service.append_event(session, _event({"user:counter": 1}))
    await session_service.append_event(session, _event({"user:counter": 2}))
    assert await session_service.get_user_state(app_name=APP, user_id="u1") == {
        "profile": {"name": "Alice"},
        "counter": 2,
    }
    assert await session_service.get_user_state(app_name=APP, user_id="u2") == {}
    assert await session_service.get_user_state(app_name="other_app", user_id="u1") == {}
