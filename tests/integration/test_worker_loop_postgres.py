"""The runner cache on PostgreSQL, where a turn's start reads the configuration's stamp in the
statement that claims it (agents_app.turn_sql, agents_app.run_cache.runner_cached): a turn whose
cached runner is current starts with no hop to the database thread, and an edit, a bulk update, a
disabled agent or an edit of an agent used as a tool is still seen by the next turn. The tests of
tests/agents_app/test_worker_loop.py (SQLite, the ORM path) run here too."""

from __future__ import annotations

import pytest

from agents_app import run_cache, runner, services, turn_exec
from agents_app.models import AgentConfig, Turn
from tests.agents_app.test_worker_loop import (  # noqa: F401 - collected here too, on PostgreSQL
    _turn,
    drained,
    test_a_queryset_update_is_seen_too,
    test_an_edit_rebuilds_the_runner_and_turns_record_their_version,
    test_one_loop_and_one_runner_serve_many_turns,
    test_threads_do_not_share_loops_or_runners,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("drained")]


@pytest.fixture
def prepares(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The turns that took the database thread to find their runner (`turn_exec._prepare`)."""
    seen: list[int] = []
    prepare = turn_exec._prepare

    def counted(turn, claim=None):
        seen.append(turn.pk)
        return prepare(turn, claim)

    monkeypatch.setattr(turn_exec, "_prepare", counted)
    return seen


def test_a_cached_runner_starts_its_turn_without_a_read(demo, prepares):
    session = services.session_create(app_name="stock_agent", user_id="requester")
    first = _turn(session)
    assert prepares == [first.pk]  # built once
    more = [_turn(session, f"And {t}?") for t in ("MSFT", "AAPL")]
    assert prepares == [first.pk]  # the claim's stamp said the cached runner is current
    assert {t.config_version_id for t in more} == {first.config_version_id} != {None}


def test_a_turn_queued_behind_another_is_claimed_with_its_stamp(demo, prepares):
    """Two turns in one drain: the second is claimed by the first's finish (turn_sql.done_next),
    with its stamp, after an edit made while the first ran: the second runs the edited agent."""
    session = services.session_create(app_name="stock_agent", user_id="requester")
    _turn(session)
    services.message_send(session=session, text="And MSFT?", streaming=False)
    second = services.message_send(session=session, text="And AAPL?", streaming=False)
    run = turn_exec.turn_run

    async def edit_during_the_first(turn, **kwargs):
        if turn.pk != second.pk:
            from asgiref.sync import sync_to_async

            await sync_to_async(AgentConfig.objects.filter(name="stock_agent").update)(instruction="Be terse.")
        await run(turn, **kwargs)

    turn_exec.turn_run, before = edit_during_the_first, len(prepares)  # type: ignore[assignment]
    try:
        assert runner.session_turns_run(session.pk) == 2
    finally:
        turn_exec.turn_run = run  # type: ignore[assignment]
    assert set(Turn.objects.filter(session=session).values_list("status", flat=True)) == {"done"}
    assert prepares[before:] == [second.pk]  # the first ran its cached runner, the second rebuilt
    assert run_cache.cached_runners()["stock_agent"].agent.instruction == "Be terse."


def test_an_edit_of_an_agent_used_as_a_tool_is_seen(demo, prepares):
    """The claim reads the parent's row only: a parent that uses agents as tools finds its
    children's rows on the database thread, every turn."""
    session = services.session_create(app_name="assistant_agent", user_id="requester")
    first = _turn(session, "Hello")
    built = run_cache.cached_runners()["assistant_agent"]
    _turn(session, "Hello again")
    assert run_cache.cached_runners()["assistant_agent"] is built
    AgentConfig.objects.filter(name="summary_agent").update(instruction="Summaries in one line.")
    _turn(session, "And again")
    assert run_cache.cached_runners()["assistant_agent"] is not built
    assert len(prepares) == 3 and prepares[0] == first.pk


def test_stamps_read_by_the_claim_and_alone_are_the_same(demo):
    from django.db import connection

    for name in ("stock_agent", "assistant_agent"):
        alone = run_cache.read_stamp_row(name)
        with connection.cursor() as cursor:
            cursor.execute(run_cache.stamp_select("%s"), [name])
            raw = cursor.fetchone()
        assert run_cache.stamp_row(raw) == alone
        assert isinstance(alone[5], list) and alone[-1] is (name == "assistant_agent")
        assert run_cache.config_stamp(name, alone) == run_cache.config_stamp(name)
    assert run_cache.read_stamp_row("no_such_agent") is None


def _holds_a_connection() -> bool:
    """Whether this thread's worker loop's database thread holds a database connection."""
    from django.db import connection

    from agents_app import worker_loop

    return worker_loop.db_executor().submit(lambda: connection.connection is not None).result()


def test_a_drain_gives_its_connection_back_to_the_pool(demo):
    """In the hop of its last statement (the turn's end that released the lease, or a start that found
    nothing owed), not in a hop of its own: between drains the loop's thread holds no connection."""
    session = services.session_create(app_name="stock_agent", user_id="requester")
    _turn(session)
    assert not _holds_a_connection()
    assert runner.session_turns_run(session.pk) == 0  # nothing owed
    assert not _holds_a_connection()
    for _ in range(2):  # two turns, one drain
        services.message_send(session=session, text="What is the price of GOOG?", streaming=False)
    assert runner.session_turns_run(session.pk) == 2
    assert not _holds_a_connection()
    assert list(Turn.objects.filter(session=session).values_list("status", flat=True)) == ["done"] * 3
