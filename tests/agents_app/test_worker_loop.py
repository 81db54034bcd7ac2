"""The worker's long-lived loop and its runner cache (agents_app.worker_loop, agents_app.run_cache):
one loop per thread survives many turns, a runner is built once per agent configuration and
rebuilt after an edit (each turn still records the version it ran with), a disabled agent's turn
fails even though a runner was cached, nothing is shared between threads, and a forked child
runs turns on a loop of its own."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest

from agents_app import run_cache, runner, services, worker_loop
from agents_app.config_history import agent_config_record
from agents_app.models import AgentConfig, AgentConfigVersion, Turn
from tests.engine_scenarios import agent_texts

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def drained(monkeypatch):
    """Drains are driven by the test itself (no worker): enqueues go nowhere."""
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", lambda **kw: True)


def _turn(session, text: str = "What is the price of GOOG?") -> Turn:
    turn = services.message_send(session=session, text=text, streaming=False)
    assert runner.session_turns_run(session.pk) == 1
    turn.refresh_from_db()
    assert turn.status == "done", turn.error
    return turn


def test_one_loop_and_one_runner_serve_many_turns(demo, drained):
    session = services.session_create(app_name="stock_agent", user_id="requester")
    _turn(session)
    loop, built = worker_loop.loop_id(), run_cache.cached_runners()["stock_agent"]
    before = worker_loop.loop_turns()
    for _ in range(5):
        _turn(session)
    assert worker_loop.loop_id() == loop
    assert worker_loop.loop_turns() == before + 5
    assert run_cache.cached_runners()["stock_agent"] is built  # not rebuilt for an unchanged agent
    assert len(agent_texts(session)) == 6


def test_an_edit_rebuilds_the_runner_and_turns_record_their_version(demo, drained):
    stock = AgentConfig.objects.get(name="stock_agent")
    session = services.session_create(app_name="stock_agent", user_id="requester")
    first = _turn(session)
    built = run_cache.cached_runners()["stock_agent"]
    assert first.config_version == AgentConfigVersion.objects.get(agent=stock, version=1)

    stock.instruction = "Quote prices and say where they come from."
    stock.save()
    v2 = agent_config_record(config=stock, actor=demo["admin"])
    second = _turn(session, "And MSFT?")
    rebuilt = run_cache.cached_runners()["stock_agent"]
    assert rebuilt is not built
    assert rebuilt.agent.instruction == "Quote prices and say where they come from."
    assert second.config_version == v2

    third = _turn(session, "And AAPL?")
    assert run_cache.cached_runners()["stock_agent"] is rebuilt and third.config_version == v2


def test_a_queryset_update_is_seen_too(demo, drained):
    """No admin, no version: a bulk update still changes what the next turn runs with."""
    session = services.session_create(app_name="stock_agent", user_id="requester")
    _turn(session)
    AgentConfig.objects.filter(name="stock_agent").update(enabled=False)
    turn = services.message_send(session=session, text="And MSFT?", streaming=False)
    runner.session_turns_run(session.pk)
    turn.refresh_from_db()
    assert turn.status == "failed" and "No enabled agent" in turn.error  # not run by the cached runner
    AgentConfig.objects.filter(name="stock_agent").update(enabled=True, instruction="Be brief.")
    _turn(session, "And AAPL?")
    assert run_cache.cached_runners()["stock_agent"].agent.instruction == "Be brief."


def test_threads_do_not_share_loops_or_runners(demo, drained):
    session = services.session_create(app_name="stock_agent", user_id="requester")
    _turn(session)
    mine = (worker_loop.loop_id(), run_cache.cached_runners()["stock_agent"])
    seen: list = []

    def other() -> None:
        from django.db import connection

        try:
            _turn(session, "And MSFT?")
            seen.append((worker_loop.loop_id(), run_cache.cached_runners()["stock_agent"]))
        finally:
            connection.close()

    thread = threading.Thread(target=other)
    thread.start()
    thread.join(60)
    assert len(seen) == 1
    assert seen[0][0] != mine[0] and seen[0][1] is not mine[1]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_runs_turns_on_a_loop_of_its_own(demo, drained):
    """As a prefork pool's child: whatever the parent held (a loop, its database thread, runners)
    is not used in the child, which makes its own and runs the turn."""
    from django.db import connections

    session = services.session_create(app_name="stock_agent", user_id="requester")
    _turn(session)  # the parent now holds a loop, a database thread and a cached runner
    parent_loop = worker_loop.loop_id()
    turn = services.message_send(session=session, text="And MSFT?", streaming=False)
    connections.close_all()
    pid = os.fork()
    if pid == 0:  # the child: exit status says what happened (no pytest machinery here)
        code = 1
        try:
            for conn in connections.all():
                conn.connection = None  # the parent's socket is not ours: open our own
            ran = runner.session_turns_run(session.pk)
            fresh = worker_loop.loop_id() != parent_loop and "stock_agent" in run_cache.cached_runners()
            code = 0 if ran == 1 and fresh else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    turn.refresh_from_db()
    assert turn.status == "done"
    # The child left the parent's loop alone: it still wakes at once for its database thread (a
    # child that closed it unregistered the wake-up from the selector they share; the parent then
    # woke only at its next timer, here the 5 s limit, and a drain with no timer hung).
    assert worker_loop.run(_database_thread_round_trip()) < 2.5
    assert worker_loop.loop_id() == parent_loop


async def _database_thread_round_trip() -> float:
    started = time.monotonic()
    loop = asyncio.get_running_loop()
    await asyncio.wait_for(loop.run_in_executor(worker_loop.db_executor(), time.sleep, 0.3), 5)
    return time.monotonic() - started


def test_loop_threads_are_daemons_and_close_all_stops_them(demo, drained):
    """Nothing a turn leaves behind holds the process at exit: the loop's database thread is a
    daemon, and close_all() (a Celery worker's shutdown) ends it; the next turn makes a new loop."""
    session = services.session_create(app_name="stock_agent", user_id="requester")
    _turn(session)
    threads = worker_loop.loop_threads()
    assert threads and all(t.daemon for t in threads), threads
    before = worker_loop.loop_id()
    assert worker_loop.close_all() >= 1
    for thread in threads:
        thread.join(10)
    assert not any(t.is_alive() for t in threads)
    _turn(session, "And MSFT?")
    assert worker_loop.loop_id() != before


def test_a_celery_worker_shutdown_closes_the_loops(demo, drained):
    from celery.signals import worker_shutdown

    session = services.session_create(app_name="stock_agent", user_id="requester")
    _turn(session)
    threads = worker_loop.loop_threads()
    worker_shutdown.send(sender=None)
    for thread in threads:
        thread.join(10)
    assert threads and not any(t.is_alive() for t in threads)


def test_a_loop_collected_while_another_loop_runs_in_the_thread_is_still_closed():
    """A thread's loop is closed by its finalizer, which the garbage collector may run on a thread that
    runs a loop of its own. The close runs the closing loop (the channel layers flush their
    connections there): Python refuses that on such a thread, and the loop was left open (seen in CI
    as an unraisable RuntimeError). It is closed from a thread of its own instead."""
    loop = asyncio.new_event_loop()
    ran: list[bool] = []
    original = loop.close

    def close_like_a_channel_layer() -> None:  # channels_redis's close wrapper, our wires' too
        ran.append(loop.run_until_complete(asyncio.sleep(0, True)))
        original()

    loop.close = close_like_a_channel_layer  # type: ignore[method-assign]

    async def elsewhere() -> None:
        worker_loop._close(loop)

    asyncio.run(elsewhere())
    deadline = time.monotonic() + 5
    while not loop.is_closed() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert loop.is_closed() and ran == [True]


def test_a_cached_runner_has_one_adkweb_plugin_that_also_guards_the_lease(demo, drained):
    """The worker's runner carries one adkweb plugin (ADK awaits every plugin's every callback, ~15 a
    turn): it drops what the backend refuses from the request, as BackendFieldsPlugin does, and stops
    the run before a model or tool call once the turn's lease is known lost."""
    from google.adk.models.llm_request import LlmRequest
    from google.genai import types

    from agents_app.leases import Lease, LeaseLost, current_lease
    from agents_app.plugins import BackendFieldsPlugin

    session = services.session_create(app_name="stock_agent", user_id="requester")
    _turn(session)
    plugins = run_cache.cached_runners()["stock_agent"].app.plugins
    ours = [p for p in plugins if p.name.startswith("adkweb_")]
    assert len(ours) == 1 and isinstance(ours[0], BackendFieldsPlugin)
    guard = ours[0]

    class Context:  # what before_model_callback reads: the agent's model (the demo's: not Gemini)
        _invocation_context = type("I", (), {"agent": object()})()

    answer = types.FunctionResponse(name="f", response={}, will_continue=True)
    request = LlmRequest(contents=[types.Content(role="user", parts=[types.Part(function_response=answer)])])
    lease = Lease(session.pk, "owner")

    async def model_and_tool() -> None:
        token = current_lease.set(lease)
        try:
            assert await guard.before_model_callback(callback_context=Context(), llm_request=request) is None
            assert await guard.before_tool_callback(tool=None, tool_args={}, tool_context=None) is None
            lease.lost = True
            with pytest.raises(LeaseLost):
                await guard.before_model_callback(callback_context=Context(), llm_request=request)
            with pytest.raises(LeaseLost):
                await guard.before_tool_callback(tool=None, tool_args={}, tool_context=None)
        finally:
            current_lease.reset(token)

    asyncio.run(model_and_tool())
    assert request.contents[0].parts[0].function_response.will_continue is None  # the backend's fix kept
