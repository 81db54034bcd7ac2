"""bench/turn_path.py's paired phase: issue 12 target 3's run stage in one run, a real worker's turn and
ADK's Runner called directly taking turns. Not a test: it prints figures (run bench/turn_path.py).

Paths 3r and 5 of turn_path.py run one after the other, seconds apart: on shared cores the machine's
other load moves either by more than the 10% the target allows. Here, in path 5's child process (a
`celery worker` subprocess on Redis, idle between turns), each pair is one turn of ADK's `Runner` on
`DjangoSessionService` with the App the worker runs (resumable, adkweb's plugins: path 3r), timed in
this process, and one turn sent to the worker (`message_send`, one in flight), whose run stage is read
from its Turn row (claimed -> finished, as path 5's); which goes first alternates pair by pair. Both
sessions are new every `--turns-per-session` turns, as in the other phases.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from turn_path_worker import APP, EVENTS_PER_TURN, TEXT, USER, FinishedTurns, Row, new_sessions, pct, worker_cpu_ms

NAME = "5 vs 3r, paired turn by turn"


def _direct(loop: asyncio.AbstractEventLoop) -> Any:
    """ADK's Runner on DjangoSessionService with the App the worker runs, and one timed turn of it."""
    from google.adk.runners import Runner
    from google.genai import types

    from agents_app.run_cache import app_for_run
    from agents_app.session_service import DjangoSessionService

    runner = Runner(app=app_for_run(APP), session_service=DjangoSessionService())

    def new_session() -> str:
        return str(loop.run_until_complete(runner.session_service.create_session(app_name=APP, user_id=USER)).id)

    def turn(session_id: str) -> float:
        async def run() -> int:
            message = types.Content(role="user", parts=[types.Part(text=TEXT)])
            return len([e async for e in runner.run_async(user_id=USER, session_id=session_id, new_message=message)])

        cpu, started = time.process_time(), time.perf_counter()
        yielded = loop.run_until_complete(run())
        elapsed = (time.perf_counter() - started) * 1000
        assert yielded >= EVENTS_PER_TURN - 1, f"direct: {yielded} events yielded"
        return elapsed, (time.process_time() - cpu) * 1000

    return new_session, turn


def pairs_phase(n_sessions: int, per_session: int) -> Row:
    """`n_sessions * per_session` pairs; the Row's `ms` are the worker's turns (submit -> turn.finished
    received), its breakdown the medians of both sides' stages and the pairs' ratios."""
    from django.db import connection

    from agents_app.models import Turn
    from agents_app.services import message_send

    loop = asyncio.new_event_loop()
    new_session, direct_turn = _direct(loop)
    worker_sessions = new_sessions(n_sessions)
    direct_ms: list[float] = []
    direct_cpu: list[float] = []  # this process's CPU in a direct turn (its listener thread idle meanwhile)
    worker_cpu: list[float] = []  # the worker process's CPU in a worker turn (claim to its publishes)
    samples: list[tuple[int, float]] = []  # (turn id, submit -> finished received)
    started = time.perf_counter()
    try:
        with FinishedTurns([s.pk for s in worker_sessions]) as finished:
            direct_turn(new_session())  # outside the timings: the direct path's first-call caches
            for session in worker_sessions:
                direct_session = new_session()
                for _ in range(per_session):
                    # pair k: the direct turn first when k is even (k = the pairs done so far, every session's)
                    for side in ("direct", "worker") if len(direct_ms) % 2 == 0 else ("worker", "direct"):
                        if side == "direct":
                            ms, cpu = direct_turn(direct_session)
                            direct_ms.append(ms)
                            direct_cpu.append(cpu)
                        else:
                            before = worker_cpu_ms()
                            sent = time.perf_counter()
                            turn = message_send(
                                session=session, text=TEXT, streaming=False
                            )  # as path 5 (True: the demo model sleeps)
                            at, _ = finished.wait(turn.pk)
                            samples.append((turn.pk, (at - sent) * 1000))
                            worker_cpu.append(worker_cpu_ms() - before)
    finally:
        loop.close()
    wall = time.perf_counter() - started
    turns = Turn.objects.in_bulk([pk for pk, _ in samples])
    runs = [(turns[pk].finished_at - turns[pk].started_at).total_seconds() * 1000 for pk, _ in samples]
    connection.close()
    ratios = sorted(r / d for r, d in zip(runs, direct_ms, strict=True))
    block = max(1, per_session)
    blocks = [pct(runs[i : i + block], 0.5) / pct(direct_ms[i : i + block], 0.5) for i in range(0, len(runs), block)]
    breakdown = {
        "run": pct(runs, 0.5),
        "run_p95": pct(runs, 0.95),
        "direct": pct(direct_ms, 0.5),
        "direct_p95": pct(direct_ms, 0.95),
        "pair_ratio_median": pct(ratios, 0.5),
        "direct_cpu": sum(direct_cpu) / len(direct_cpu),
        "worker_cpu": sum(worker_cpu) / len(worker_cpu),
        "blocks": blocks,
    }
    return Row(NAME, [ms for _, ms in samples], wall, breakdown)


def print_pairs(row: Row) -> None:
    b = row.breakdown
    blocks: list[float] = b["blocks"]
    print(
        f"\npaired ({len(row.ms)} pairs, in path 5's process, which goes first alternating): the worker's run stage "
        f"(claimed -> finished) median {b['run']:.1f} ms (p95 {b['run_p95']:.1f}), ADK's Runner on "
        f"DjangoSessionService with the same App {b['direct']:.1f} ms (p95 {b['direct_p95']:.1f})\n"
        f"  run/(3r) paired: {b['run'] / b['direct']:.2f}x of the medians, median of the pairs' ratios "
        f"{b['pair_ratio_median']:.2f}x; per session of turns: {' '.join(f'{x:.2f}' for x in blocks)}   "
        "(target 3: <= 1.1x)\n"
        f"  CPU a turn (means): the worker process {b['worker_cpu']:.1f} ms (the whole turn: claim, run, DONE, "
        f"publishes; clock ticks), the direct Runner {b['direct_cpu']:.1f} ms: "
        f"{b['worker_cpu'] / b['direct_cpu']:.2f}x\n"
        "  (the direct turns run in path 5's driving process, with the worker's settings: the store publishes on the\n"
        "  Redis channel layer as in the worker; path 3r's figures above come from the first process, minutes earlier)"
    )
