"""agents_app.eager's drain on its slot's thread: a drain that ends in asyncio.CancelledError (a
BaseException, raised out of the thread's loop by worker_loop.run as any error of the drain is: a
library's cancel scope, a future cancelled inside the drain) is logged as a failed drain, and what it
left queued still gets its wake-up, the thread's connection given back, as after any failed drain."""

from __future__ import annotations

import asyncio

import pytest

from agents_app import eager, worker_loop
from agents_app.models import Turn


def test_a_cancelled_eager_drain_is_logged_and_hands_on_what_it_left(monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    async def cancelled() -> int:
        raise asyncio.CancelledError

    monkeypatch.setattr(eager, "_session_drain", lambda session_pk: worker_loop.run(cancelled()))
    monkeypatch.setattr(Turn, "owed", staticmethod(lambda session_pk: True))
    closed: list[int] = []
    monkeypatch.setattr(eager, "close_old_connections", lambda: closed.append(1))
    woken: list[int] = []
    eager._drain(5, woken.append)  # red before: the CancelledError went on and ended the slot's thread
    assert woken == [5], "what the drain left queued got no wake-up"
    assert closed == [1]
    assert "Eager drain of session 5 failed" in caplog.text
