"""DjangoSessionService beyond the shared contract: stale writers are refused, a failing event
hook stores nothing, and events from real ADK runs (every pause type) round-trip losslessly."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from google.adk.errors._stale_session_error import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.session import Session
from google.genai import types

from agents_app import session_hooks
from agents_app import session_service as service_module
from agents_app.models import AdkSession, StoredEvent
from agents_app.session_service import DjangoSessionService

pytestmark = pytest.mark.django_db(transaction=True)
APP = "my_app"


def _event(state_delta: dict[str, Any], invocation_id: str = "inv") -> Event:
    """A user event carrying a state delta."""
    return Event(invocation_id=invocation_id, author="user", actions=EventActions(state_delta=state_delta))


async def _stored(session_id: str) -> list[dict[str, Any]]:
    """The stored event rows of a session, oldest first."""
    rows = StoredEvent.objects.filter(session__session_id=session_id).order_by("id")
    return [row async for row in rows.values("event_id", "interrupt_ids", "response_ids", "data")]


async def test_stale_copy_is_refused_and_stores_nothing(service):
    created = await service.create_session(app_name=APP, user_id="u", session_id="s")
    first = await service.get_session(app_name=APP, user_id="u", session_id="s")
    second = await service.get_session(app_name=APP, user_id="u", session_id="s")
    await service.append_event(first, _event({"winner": 1, "user:w": 1}, "inv-1"))
    for loser in (second, created):
        with pytest.raises(StaleSessionError):
            await service.append_event(loser, _event({"loser": 1, "user:l": 1, "app:l": 1}, "inv-2"))
    got = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert [e.invocation_id for e in got.events] == ["inv-1"]
    assert got.state == {"winner": 1, "user:w": 1}
    assert (await AdkSession.objects.aget(session_id="s")).revision == 1
    # The winner's copy is current and keeps writing; a fresh read lets the loser retry.
    await service.append_event(first, _event({"again": 1}, "inv-3"))
    fresh = await service.get_session(app_name=APP, user_id="u", session_id="s")
    await service.append_event(fresh, _event({"loser": 1}, "inv-2"))
    assert [e.invocation_id for e in fresh.events] == ["inv-1", "inv-3", "inv-2"]


async def test_stale_copy_without_marker_is_refused_by_update_time(service):
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    old = Session(app_name=APP, user_id="u", id="s", last_update_time=session.last_update_time)
    await service.append_event(session, Event(author="user", timestamp=session.last_update_time + 5))
    with pytest.raises(StaleSessionError):
        await service.append_event(old, Event(author="user", timestamp=session.last_update_time + 6))
    assert len(await _stored("s")) == 1


async def test_copies_from_list_sessions_are_current_until_someone_writes(service):
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    (listed,) = (await service.list_sessions(app_name=APP, user_id="u")).sessions
    await service.append_event(listed, _event({"k": 1}))
    with pytest.raises(StaleSessionError):
        await service.append_event(session, _event({"k": 2}))
    assert (await service.get_session(app_name=APP, user_id="u", session_id="s")).state == {"k": 1}


async def test_concurrent_writers_from_one_revision_exactly_one_wins(service):
    await service.create_session(app_name=APP, user_id="u", session_id="s")

    def store(copy: Session, event: Event) -> str:
        """Append in a thread of its own (its own connection), as two workers would."""
        try:
            service._store_event(copy, event, None)
            return "stored"
        except StaleSessionError:
            return "stale"
        finally:
            connections.close_all()

    for i in range(5):
        latest = await service.get_session(app_name=APP, user_id="u", session_id="s")
        copies = [latest.model_copy(deep=True) for _ in range(2)]
        results = await asyncio.gather(
            *(
                sync_to_async(store, thread_sensitive=False)(copy, _event({f"k{i}-{n}": n}, f"inv{i}-{n}"))
                for n, copy in enumerate(copies)
            )
        )
        assert sorted(results) == ["stale", "stored"]
    got = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert len(got.events) == 5 and len(got.state) == 5
    assert (await AdkSession.objects.aget(session_id="s")).revision == 5


async def test_failing_event_hook_rolls_back_the_event(service):
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")

    def explode(row: AdkSession, stored: StoredEvent, event: Event) -> None:
        raise RuntimeError("hook failed")

    session_hooks.register_event_hook(explode, wants_every_event=True)
    try:
        with pytest.raises(RuntimeError, match="hook failed"):
            await service.append_event(session, _event({"k": 1, "app:a": 1}))
    finally:
        session_hooks.unregister_event_hook(explode)
    got = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert got.events == [] and got.state == {}
    assert (await AdkSession.objects.aget(session_id="s")).revision == 0


async def test_interrupt_and_response_ids_are_recorded(service):
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    calls = [types.Part(function_call=types.FunctionCall(id=i, name="t", args={})) for i in ("c2", "c1", "c3")]
    await service.append_event(
        session,
        Event(
            author="agent",
            long_running_tool_ids={"c1", "c2"},
            content=types.Content(role="model", parts=calls),
        ),
    )
    answer = types.Part(function_response=types.FunctionResponse(id="c1", name="t", response={"ok": True}))
    await service.append_event(session, Event(author="user", content=types.Content(role="user", parts=[answer])))
    rows = await _stored("s")
    assert [(r["interrupt_ids"], r["response_ids"]) for r in rows] == [(["c1", "c2"], []), ([], ["c1"])]


# -- lossless round trip of events from real ADK runs ---------------------------------------

SCRIPT: list[tuple[str, str | dict[str, Any], dict[str, Any] | None]] = [
    # (app, what the user sends, state_delta for the run)
    ("reimbursement_agent", "Please reimburse 200$ for meals", {"k": "v", "user:u": 1, "app:a": [1], "temp:t": 2}),
    ("reimbursement_agent", {"status": "approved"}, None),  # answer the long-running call
    ("transfer_agent", "transfer $500 to Bob", None),
    ("transfer_agent", {"confirmed": True}, None),  # answer adk_request_confirmation
    ("intake_agent", "a laptop", None),
    ("intake_agent", {"model": "X1", "budget": 1500}, None),  # answer adk_request_input
    ("intake_agent", '/call get_user_choice {"options": ["A", "B"]}', None),
    ("intake_agent", {"result": "B"}, None),
    ("assistant_agent", "Summarise: the quick brown fox jumps over the lazy dog.", None),
    ("fan_out", "Two branches would be better than one.", None),
]


def _message(sent: str | dict[str, Any], events: list[Event]) -> types.Content:
    """Text as is; a dict answers the newest open long-running call of the run so far."""
    if isinstance(sent, str):
        return types.Content(role="user", parts=[types.Part(text=sent)])
    call = next(
        fc for e in reversed(events) for fc in e.get_function_calls() if fc.id in (e.long_running_tool_ids or ())
    )
    response = types.FunctionResponse(id=call.id, name=call.name, response=sent)
    return types.Content(role="user", parts=[types.Part(function_response=response)])


def _branching_agent() -> Any:
    """A ParallelAgent (its children's events carry a branch) whose model responses carry custom metadata."""
    from google.adk.agents import LlmAgent, ParallelAgent

    from agents_app.demo.model import DemoLlm

    def tag(callback_context: Any, llm_response: Any) -> None:
        llm_response.custom_metadata = {"source": "test", "score": 0.5}

    child = LlmAgent(name="summariser", model=DemoLlm(), instruction="Summarise.", after_model_callback=tag)
    return ParallelAgent(name="fan_out", sub_agents=[child])


async def _agent(app: str) -> Any:
    """The demo agent for an app name, or the branching agent."""
    from agents_app.agents import build_agent

    return _branching_agent() if app == "fan_out" else await sync_to_async(build_agent)(app)


async def _run_script(service: DjangoSessionService) -> dict[str, list[Event]]:
    """Run SCRIPT with the demo agents on our service; the events each app's runner yielded."""
    from google.adk.runners import Runner

    from agents_app.demo.setup import demo_setup

    await sync_to_async(demo_setup)()
    yielded: dict[str, list[Event]] = {}
    for app, sent, state_delta in SCRIPT:
        if app not in yielded:
            yielded[app] = []
            await service.create_session(app_name=app, user_id="u", session_id=f"{app}-s")
        runner = Runner(app_name=app, agent=await _agent(app), session_service=service)
        async for event in runner.run_async(
            user_id="u",
            session_id=f"{app}-s",
            new_message=_message(sent, yielded[app]),
            state_delta=state_delta,
            yield_user_message=True,
        ):
            yielded[app].append(event)
    return yielded


@pytest.fixture
async def ran(service) -> dict[str, list[Event]]:
    """SCRIPT's events, run once per test."""
    return await _run_script(service)


async def test_every_event_from_real_runs_reads_back_identical(service, ran):
    for app, events in ran.items():
        got = await service.get_session(app_name=app, user_id="u", session_id=f"{app}-s")
        for read_back in (got.events, await sync_to_async(_from_rows)(f"{app}-s")):
            by_id = {e.id: e for e in read_back}
            assert [by_id[e.id].model_dump() for e in events] == [e.model_dump() for e in events], app
            # Same order, and nothing else stored but user messages a runner does not always yield.
            assert [e.id for e in read_back if e in events] == [e.id for e in events]
            assert {e.author for e in read_back if e not in events} <= {"user"}


def _from_rows(session_id: str) -> list[Event]:
    """Events rebuilt from the stored JSON alone."""
    rows = StoredEvent.objects.filter(session__session_id=session_id).order_by("id")
    return [service_module.event_from_json(data) for data in rows.values_list("data", flat=True)]


async def test_real_runs_cover_every_pause_type_and_record_interrupt_ids(ran):
    events = [e for app_events in ran.values() for e in app_events]
    pauses = {fc.name for e in events for fc in e.get_function_calls() if fc.id in (e.long_running_tool_ids or ())}
    assert pauses == {"ask_for_approval", "adk_request_confirmation", "adk_request_input", "get_user_choice"}
    assert any(e.actions.requested_tool_confirmations for e in events)
    assert any(e.actions.skip_summarization for e in events)
    assert any(e.actions.state_delta == {"k": "v", "user:u": 1, "app:a": [1]} for e in events)
    assert any(
        e.branch == "fan_out.summariser" and e.custom_metadata == {"source": "test", "score": 0.5} for e in events
    )
    # Each pause is recorded on the row of the event that raised it, and each answer on its own row.
    pause_ids = {
        e.id: sorted(fc.id for fc in e.get_function_calls() if fc.id in (e.long_running_tool_ids or ())) for e in events
    }
    rows = [row for app in ran for row in await _stored(f"{app}-s")]
    assert {r["event_id"]: r["interrupt_ids"] for r in rows if r["interrupt_ids"]} == {
        event_id: ids for event_id, ids in pause_ids.items() if ids
    }
    answered = {i for r in rows if r["data"]["author"] == "user" for i in r["response_ids"]}
    assert answered == {i for ids in pause_ids.values() for i in ids}
    assert sum(len(ids) for ids in pause_ids.values()) == 4


async def test_text_with_a_nul_character_is_stored_on_every_backend(service):
    """PostgreSQL jsonb refuses U+0000; the event is stored with U+FFFD in its place."""
    session = await service.create_session(app_name="app", user_id="u")
    event = Event(
        invocation_id="inv",
        author="model",
        content=types.Content(role="model", parts=[types.Part(text="before\x00after")]),
    )
    await service.append_event(session, event)
    loaded = await service.get_session(app_name="app", user_id="u", session_id=session.id)
    assert loaded.events[-1].content.parts[0].text == "before\ufffdafter"


async def test_creations_in_turn_each_get_their_own_app_and_user_state_and_identity(service):
    """A creation's reads (is the identity live, the app's and the user's state) are compiled once per
    process (agents_app.session_orm): sessions of other apps and users created in turn still see
    their own, and an identity taken in one app is free in another."""
    await service.create_session(app_name="app_a", user_id="u1", session_id="s", state={"app:k": "A", "user:k": "A1"})
    await service.create_session(app_name="app_b", user_id="u1", session_id="s", state={"app:k": "B"})
    await service.create_session(app_name="app_a", user_id="u2", session_id="t", state={"user:k": "A2"})
    found = [
        (await service.create_session(app_name=app, user_id=user)).state
        for app, user in (("app_a", "u1"), ("app_b", "u1"), ("app_a", "u2"), ("app_b", "u2"), ("app_c", "u1"))
    ]
    assert found == [
        {"app:k": "A", "user:k": "A1"},
        {"app:k": "B"},
        {"app:k": "A", "user:k": "A2"},
        {"app:k": "B"},
        {},
    ]
    with pytest.raises(AlreadyExistsError):
        await service.create_session(app_name="app_b", user_id="u1", session_id="s")
    assert (await service.create_session(app_name="app_b", user_id="u2", session_id="s")).id == "s"
