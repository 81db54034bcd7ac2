"""adkweb.quiet_work: work handed to the process's quiet thread waits while foreground work runs
(adkweb.memory_broker.foreground: a request, a turn) and goes QUIET seconds after it ends, or MOST
seconds after it came however busy the process stays; in order, an error logged and the next one run."""

from __future__ import annotations

import logging
import threading
import time

from adkweb import memory_broker
from adkweb.quiet_work import when_quiet
from tests.conftest import wait_for


def test_work_waits_for_the_foreground_work_to_end_and_then_QUIET(monkeypatch):
    monkeypatch.setattr(memory_broker, "QUIET", 0.3)
    ran: list[tuple[str, float]] = []
    with memory_broker.foreground():  # a turn runs
        when_quiet(lambda: ran.append(("work", time.monotonic())))
        time.sleep(0.8)
        assert ran == []  # not while the turn runs
        ended = time.monotonic()
    wait_for(lambda: ran, timeout=10, what="the quiet work")
    assert ran[0][0] == "work" and 0.25 <= ran[0][1] - ended < 5, ran[0][1] - ended


def test_work_goes_after_MOST_however_busy_the_process_is(monkeypatch):
    monkeypatch.setattr(memory_broker, "QUIET", 60.0)
    monkeypatch.setattr(memory_broker, "MOST", 0.5)
    ran: list[int] = []
    with memory_broker.foreground():
        came = time.monotonic()
        when_quiet(ran.append, 1)
        when_quiet(ran.append, 2)
        wait_for(lambda: len(ran) == 2, timeout=10, what="the held work")
        took = time.monotonic() - came
    assert ran == [1, 2] and 0.4 <= took < 5, took  # all that was held, in order


def test_a_failing_piece_is_logged_and_the_next_one_runs(caplog):
    ran = threading.Event()

    def fails() -> None:
        raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR, logger="adkweb.quiet_work"):
        when_quiet(fails)
        when_quiet(ran.set)
        assert ran.wait(10)
    assert any("boom" in (r.exc_text or "") or r.exc_info for r in caplog.records), caplog.records


def test_work_goes_at_once_when_nothing_runs():
    ran = threading.Event()
    time.sleep(memory_broker.QUIET)  # whatever ran before this test has ended
    started = time.monotonic()
    when_quiet(ran.set)
    assert ran.wait(10) and time.monotonic() - started < 1
