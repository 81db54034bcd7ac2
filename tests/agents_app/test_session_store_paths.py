"""DjangoSessionService's append paths: on PostgreSQL an event no hook wants is stored in one
statement, one a hook wants in one statement plus the hooks in the same transaction, and anything
wrong (stale copy, archived session, lost lease) falls back to the checked path that says why. Each
case here runs with and without a state change (the two used to take different paths), on SQLite
and (tests/integration/test_session_service_postgres.py) on PostgreSQL."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from google.adk.errors._stale_session_error import StaleSessionError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.genai import types

from agents_app import session_hooks
from agents_app.event_json import _without_nul, event_json_text, event_to_json
from agents_app.leases import Lease, LeaseLost, current_lease
from agents_app.models import AdkSession, AppState, StoredEvent, Turn, UserState
from agents_app.session_service import DjangoSessionService, current_turn_id, current_turn_invocations

pytestmark = pytest.mark.django_db(transaction=True)
APP = "my_app"
DELTAS = [None, {"k": 1}, {"user:u": 1, "app:a": 1}]


def _event(delta: dict[str, Any] | None, text: str = "hi") -> Event:
    content = types.Content(role="model", parts=[types.Part(text=text)])
    return Event(author="agent", invocation_id="inv", content=content, actions=EventActions(state_delta=delta or {}))


async def _count(session_id: str) -> int:
    return await StoredEvent.objects.filter(session__session_id=session_id).acount()


@pytest.mark.parametrize("delta", DELTAS)
async def test_stale_copy_is_refused_whatever_the_event_changes(service, delta):
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    copy = await service.get_session(app_name=APP, user_id="u", session_id="s")
    await service.append_event(session, _event(None))
    with pytest.raises(StaleSessionError):
        await service.append_event(copy, _event(delta))
    assert await _count("s") == 1
    got = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert got.state == {} and len(got.events) == 1
    assert not await AppState.objects.filter(app_name=APP).aexists()
    assert not await UserState.objects.filter(app_name=APP).aexists()


@pytest.mark.parametrize("delta", DELTAS)
async def test_appending_to_an_archived_session_stores_nothing(service, delta):
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    await service.delete_session(app_name=APP, user_id="u", session_id="s")
    with pytest.raises(SessionNotFoundError):
        await service.append_event(session, _event(delta))
    assert await StoredEvent.objects.acount() == 0


@pytest.mark.parametrize("delta", DELTAS)
async def test_append_checks_and_renews_the_lease(service, delta):
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    row = await AdkSession.objects.aget(session_id="s")
    soon = timezone.now() + timedelta(seconds=1)
    await AdkSession.objects.filter(pk=row.pk).aupdate(lease_owner="me", lease_expires_at=soon)
    mine = Lease(session_pk=row.pk, owner="me")
    token = current_lease.set(mine)
    try:
        await service.append_event(session, _event(delta))
    finally:
        current_lease.reset(token)
    renewed = (await AdkSession.objects.aget(pk=row.pk)).lease_expires_at
    assert renewed > soon + timedelta(seconds=5)  # ADKWEB_SESSION_LEASE_SECONDS from now
    # Another worker took the session over: nothing more is stored, and the lease is marked lost.
    await AdkSession.objects.filter(pk=row.pk).aupdate(lease_owner="other")
    token = current_lease.set(mine)
    try:
        with pytest.raises(LeaseLost):
            await service.append_event(session, _event(delta, text="late"))
    finally:
        current_lease.reset(token)
    assert mine.lost and await _count("s") == 1
    assert (await AdkSession.objects.aget(pk=row.pk)).revision == 1


async def test_state_changes_are_merged_per_scope_in_one_append(service):
    one = await service.create_session(app_name=APP, user_id="u", session_id="s1", state={"a": 0, "app:x": 1})
    await service.append_event(one, _event({"a": 1, "b": {"c": 2}, "user:y": 2, "app:z": 3, "temp:t": 4}))
    await service.append_event(one, _event({"b": 3, "user:y": 5}))
    got = await service.get_session(app_name=APP, user_id="u", session_id="s1")
    assert got.state == {"a": 1, "b": 3, "app:x": 1, "app:z": 3, "user:y": 5}
    other = await service.create_session(app_name=APP, user_id="v", session_id="s2")
    assert other.state == {"app:x": 1, "app:z": 3}


async def test_the_turn_and_its_invocation_are_recorded_once(service):
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    row = await AdkSession.objects.aget(session_id="s")
    turn = await Turn.objects.acreate(session=row, kind="message", content={})
    recorded: set[str] = set()
    tokens = current_turn_id.set(turn.pk), current_turn_invocations.set(recorded)
    try:
        await service.append_event(session, _event(None))
        await service.append_event(session, _event({"k": 1}))
    finally:
        current_turn_id.reset(tokens[0])
        current_turn_invocations.reset(tokens[1])
    assert (await Turn.objects.aget(pk=turn.pk)).invocation_id == "inv" and recorded == {"inv"}
    assert await StoredEvent.objects.filter(turn=turn).acount() == 2


async def test_hooks_run_only_for_events_they_want_and_in_the_append_transaction(service):
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    seen: list[str] = []

    def hook(row: AdkSession, stored: StoredEvent, event: Event) -> None:
        seen.append(stored.event_id)
        assert (row.session_id, stored.session_id, stored.data["id"]) == ("s", row.pk, event.id)
        if "explode" in event.content.parts[0].text:
            raise RuntimeError("hook failed")

    session_hooks.register_event_hook(hook, wants=lambda e, s: "hook" in (e.content.parts[0].text or ""))
    try:
        await service.append_event(session, _event(None, text="plain"))
        wanted = _event(None, text="hook me")
        await service.append_event(session, wanted)
        for delta in ({"k": 1, "app:a": 1}, None):  # a hook's failure undoes the append, whatever the path
            with pytest.raises(RuntimeError, match="hook failed"):
                await service.append_event(session, _event(delta, text="hook explode"))
    finally:
        session_hooks.unregister_event_hook(hook)
    assert len(seen) == 3 and seen[0] == wanted.id
    got = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert [e.content.parts[0].text for e in got.events] == ["plain", "hook me"] and got.state == {}


async def test_nul_is_replaced_and_escaped_backslashes_are_kept(service):
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    texts = ["a\x00b", "a\\u0000b", "a\\\x00b", "a\\\\u0000b", "\x00\\\x00"]
    for text in texts:
        await service.append_event(session, _event(None, text=text))
    event = _event(None)
    event.custom_metadata = {"key\x00": "value\x00"}
    await service.append_event(session, event)
    got = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert [e.content.parts[0].text for e in got.events[:-1]] == [t.replace("\x00", "\ufffd") for t in texts]
    assert got.events[-1].custom_metadata == {"key\ufffd": "value\ufffd"}


def test_event_json_text_is_what_the_store_kept_before():
    """One serialisation (pydantic-core) gives what model_dump + the NUL walk + json.dumps gave."""
    calls = [types.Part(function_call=types.FunctionCall(id="c1", name="t", args={"x": [1, 2.5, None, "\x00"]}))]
    event = Event(
        author="agent",
        invocation_id="inv",
        long_running_tool_ids={"c1"},
        content=types.Content(role="model", parts=[*calls, types.Part(inline_data=types.Blob(data=b"\x00\xff"))]),
        actions=EventActions(state_delta={"k": "\\u0000"}, skip_summarization=True),
    )
    assert json.loads(event_json_text(event)) == _without_nul(event_to_json(event))


@pytest.mark.parametrize("delta", DELTAS)
async def test_a_copy_of_a_deleted_session_does_not_write_into_a_new_one_with_its_id(service, delta):
    """Both sessions are at revision 0: the copy is refused because the row is another one, not
    because the revisions differ (they do not)."""
    old = await service.create_session(app_name=APP, user_id="u", session_id="s")
    await service.delete_session(app_name=APP, user_id="u", session_id="s")
    await service.create_session(app_name=APP, user_id="u", session_id="s")
    with pytest.raises(StaleSessionError):
        await service.append_event(old, _event(delta))
    assert await StoredEvent.objects.acount() == 0
    got = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert got.state == {} and got.events == []
    assert not await AppState.objects.filter(app_name=APP).aexists()
    assert not await UserState.objects.filter(app_name=APP).aexists()


def test_on_sqlite_an_event_no_hook_wants_is_stored_without_reading_the_row_first():
    """Embedded mode's common append: the row's checks in the UPDATE that bumps its revision, then
    the event's INSERT (and the turn's invocation, with the turn's first event), also for an event a
    hook wants (the hook given the row as saved, in the same transaction); with a state change the
    checked path (the row read and locked first). A read is two statements."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL has its one statement (test_session_store_round_trips.py)")
    service = DjangoSessionService()
    session = service.create_session_sync(app_name=APP, user_id="u", session_id="s")
    turn = Turn.objects.create(session=AdkSession.objects.get(session_id="s"), kind="message", content={})

    def statements(event: Event, turn_id: int | None) -> list[str]:
        with CaptureQueriesContext(connection) as ctx:
            service._store_event(session, event, turn_id)
        sent = [q["sql"].split()[0] for q in ctx.captured_queries]
        return [word for word in sent if word not in ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE")]

    token = current_turn_invocations.set(set())
    try:
        assert statements(_event(None), turn.pk) == ["UPDATE", "INSERT", "UPDATE"]  # + the turn's invocation
        assert statements(_event(None), turn.pk) == ["UPDATE", "INSERT"]
    finally:
        current_turn_invocations.reset(token)
    assert statements(_event({"k": 1}), None)[0] == "SELECT"
    rows: list[tuple[int, int]] = []

    def hook(row: AdkSession, stored: StoredEvent, event: Event) -> None:  # given the row as the UPDATE saved it
        rows.append((row.revision, StoredEvent.objects.filter(pk=stored.pk, session=row).count()))

    session_hooks.register_event_hook(hook, wants=lambda e, s: "hook" in (e.content.parts[0].text or ""))
    try:
        assert statements(_event(None, text="hook me"), None)[:2] == ["UPDATE", "INSERT"]
    finally:
        session_hooks.unregister_event_hook(hook)
    assert rows == [(4, 1)]
    with CaptureQueriesContext(connection) as ctx:
        got = service.get_session_sync(app_name=APP, user_id="u", session_id="s")
    assert len(ctx.captured_queries) == 2  # the session with its app and user state, then its events
    assert got is not None and len(got.events) == 4 and got.state == {"k": 1}
    assert AdkSession.objects.get(session_id="s").revision == 4
    assert Turn.objects.get(pk=turn.pk).invocation_id == "inv"
    connection.close()


def test_a_hook_registered_without_a_filter_is_called_for_every_event_and_says_so(caplog):
    """A hook with no `wants` wants every event (so every append takes the slower path): its author
    is told when registering it, unless it says that is meant."""
    service = DjangoSessionService()
    session = service.create_session_sync(app_name=APP, user_id="u", session_id="s")
    seen: list[str] = []

    def every(row: AdkSession, stored: StoredEvent, event: Event) -> None:
        seen.append(event.content.parts[0].text)

    def meant(row: AdkSession, stored: StoredEvent, event: Event) -> None:
        pass

    def filtered(row: AdkSession, stored: StoredEvent, event: Event) -> None:
        pass

    with caplog.at_level("WARNING", logger="agents_app.session_hooks"):
        session_hooks.register_event_hook(every)
        session_hooks.register_event_hook(meant, wants_every_event=True)
        session_hooks.register_event_hook(filtered, wants=lambda e, s: False)
    try:
        warned = [r.getMessage() for r in caplog.records if r.name == "agents_app.session_hooks"]
        assert len(warned) == 1 and "every" in warned[0] and "without `wants`" in warned[0]
        for text in ("one", "two"):
            service._store_event(session, _event(None, text=text), None)
        assert seen == ["one", "two"]
    finally:
        for hook in (every, meant, filtered):
            session_hooks.unregister_event_hook(hook)
    assert all(hook not in session_hooks._event_hooks for hook in (every, meant, filtered))
