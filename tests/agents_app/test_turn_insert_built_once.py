"""agents_app.turn_insert builds its statements once per process, into module-level dicts, on the first
call: `_sql` (the message's plain, lock and capped statements), `_prepared` (those as prepared on the
pipelined path) and `turn_insert_sqlite`'s. Another thread's first call may come while one thread is
building them (a web process's first messages, in its threads): it must find them all or none, never
some (a KeyError out of a message). Each build is watched line by line here, and at every line another
thread asks for the statements."""

from __future__ import annotations

import sys
import threading
from types import FrameType
from typing import Any

import pytest
from django.db import transaction

from agents_app import services, turn_insert


@pytest.fixture
def unbuilt(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("_SQL", "_PREPARED", "_SQLITE"):
        monkeypatch.setattr(turn_insert, name, {})


def _watched(call: Any, at_each_line: Any) -> None:
    """`call()` with `at_each_line()` run before each line of turn_insert's own code that it runs."""

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_globals.get("__name__") != turn_insert.__name__:
            return None
        if event == "line":
            at_each_line()
        return trace

    before = sys.gettrace()  # a debugger's or a coverage tool's, put back after
    sys.settrace(trace)
    try:
        call()
    finally:
        sys.settrace(before)


def _in_another_thread(call: Any) -> BaseException | None:
    failed: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # noqa: BLE001  (what the other thread met is the finding)
            failed.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return failed[0] if failed else None


def _partly(built: dict, keys: set) -> bool:
    return bool(built) and set(built) != keys


def test_a_thread_never_meets_the_statements_half_built(unbuilt):
    met: list[Any] = []

    def another_thread_asks() -> None:
        if _partly(turn_insert._SQL, {"plain", "lock", "capped"}):
            met.append(("_sql", _in_another_thread(lambda: [turn_insert._sql(n) for n in ("plain", "lock", "capped")])))
        if _partly(turn_insert._PREPARED, {False, True}):
            met.append(("_prepared", _in_another_thread(lambda: [turn_insert._prepared(c) for c in (False, True)])))

    _watched(lambda: turn_insert._prepared(False), another_thread_asks)  # _sql's build, then _prepared's
    assert met == []  # (red before: KeyError('lock') from _sql, KeyError(True) from _prepared)
    assert set(turn_insert._SQL) == {"plain", "lock", "capped"} and set(turn_insert._PREPARED) == {False, True}


@pytest.mark.skipif(transaction.get_connection().vendor != "sqlite", reason="SQLite's statements")
def test_sqlites_statements_are_never_half_built(unbuilt, demo):
    session = services.session_create(app_name="stock_agent", user_id="requester", session_id="once")
    half: list[set] = []

    def look() -> None:
        if _partly(turn_insert._SQLITE, {"running", "insert"}):
            half.append(set(turn_insert._SQLITE))

    fields = dict(
        session=session, kind="message", content={"parts": [{"text": "hi"}]}, state_delta=None, streaming=False
    )
    with transaction.atomic():
        _watched(lambda: turn_insert.turn_insert_sqlite(**fields, created_by=None, invocation_id="e"), look)
    assert half == []  # (red before: {'running'})
