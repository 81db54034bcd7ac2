"""Benchmark: a worker's drain of one turn against ADK's Runner called directly, in one process, on
the same worker loop, interleaved turn by turn. Not a test: it prints figures.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/adkweb_bench_<you> REDIS_URL=redis://127.0.0.1:6379/<n> \\
        .venv/bin/python bench/drain_inproc.py [--turns 40] [--tree /path/to/another/worktree]

Without a broker or a second process: what bench/turn_path.py's *run* stage measures (claim, run,
finish, publishes) with the queue and the process boundary taken out, and both sides on one event
loop (agents_app.worker_loop) and one channel layer. Each round sends one message and drains it
(`session_turns_run`), then runs one turn of ADK's `Runner` on `DjangoSessionService` with the App
the worker runs (turn_path.py's path 3r); a new session every 10 turns on both sides. Prints the
median wall and CPU time (this process, every thread: the drain's database thread too) of each, and
the ratios (issue 12 target 3: run <= 1.1x direct). `--tree` runs another worktree's code (a
before/after comparison: run both, alternating). The database is created and dropped
(test_<name>_drain_<pid>).
"""

from __future__ import annotations

import argparse
import os
import queue
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40, help="turns of each kind (default 40)")
    parser.add_argument("--tree", default=str(Path(__file__).resolve().parents[1]), help="the worktree to run")
    parser.add_argument(
        "--only", choices=["drain", "direct"], help="run one kind only (to profile it: py-spy record -- ...)"
    )
    args = parser.parse_args()
    root = Path(args.tree).resolve()
    sys.path.insert(0, str(root))
    os.chdir(root)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "adkweb.settings")
    os.environ["ADKWEB_EMBEDDED_WORKER"] = "0"
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-secret-key-not-for-any-deployment-0123456789")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    if not os.environ.get("DATABASE_URL", "").startswith("postgres") or not os.environ.get("REDIS_URL"):
        raise SystemExit("set DATABASE_URL (PostgreSQL) and REDIS_URL")
    import django

    django.setup()
    import logging

    logging.getLogger("google_adk.google.adk.telemetry._metrics").addFilter(
        lambda record: "token usage" not in record.getMessage()
    )
    from django.db import connection

    old_name = connection.settings_dict["NAME"]
    name = f"test_{old_name}_drain_{os.getpid()}"
    connection.settings_dict.setdefault("TEST", {})["NAME"] = name
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        print(f"{root} (load average {os.getloadavg()[0]:.1f})")
        measure(args.turns, args.only)
    finally:
        from django.db import connections

        connections.close_all()
        with connection._nodb_cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                [name],
            )
        connection.creation.destroy_test_db(old_name, verbosity=0)


def measure(turns: int, only: str | None = None) -> None:
    from asgiref.sync import ThreadSensitiveContext
    from google.adk.runners import Runner
    from google.genai import types

    from agents_app import services, worker_loop
    from agents_app.demo.setup import demo_setup
    from agents_app.run_cache import app_for_run
    from agents_app.runner import session_turns_run
    from agents_app.session_service import DjangoSessionService

    demo_setup()
    services.session_enqueue = lambda **kwargs: True  # type: ignore[assignment]  # no broker: drained here
    store = DjangoSessionService()
    runner = Runner(app=app_for_run("stock_agent"), session_service=store)
    text = "What is the price of GOOG?"

    async def direct(session_id: str) -> None:
        async with ThreadSensitiveContext(executor=worker_loop.db_executor()):
            message = types.Content(role="user", parts=[types.Part(text=text)])
            async for _ in runner.run_async(user_id="requester", session_id=session_id, new_message=message):
                pass

    jobs: queue.Queue[tuple[str, Any] | None] = queue.Queue()
    done: queue.Queue[tuple[float, float]] = queue.Queue()

    def work() -> None:  # one thread, one worker loop, as a worker thread runs its turns
        while (job := jobs.get()) is not None:
            kind, arg = job
            wall, cpu = time.perf_counter(), time.process_time()
            if kind == "drain":
                session_turns_run(arg)
            else:
                worker_loop.run(direct(arg))
            done.put(((time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000))

    threading.Thread(target=work, name="bench-worker", daemon=True).start()
    results: dict[str, list[tuple[float, float]]] = {"drain": [], "direct": []}
    warm = 3
    session: Any = None
    direct_id = ""
    for i in range(turns + warm):
        if i % 10 == 0:
            session = services.session_create(app_name="stock_agent", user_id="requester")
            direct_id = store.create_session_sync(app_name="stock_agent", user_id="requester").id
        if only != "direct":
            services.message_send(session=session, text=text, streaming=False)
        for kind, arg in (("drain", session.pk), ("direct", direct_id)):
            if only and kind != only:
                continue
            jobs.put((kind, arg))
            sample = done.get()
            if i >= warm:
                results[kind].append(sample)
    jobs.put(None)
    medians = {
        k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in results.items() if v
    }
    for kind, (wall, cpu) in medians.items():
        print(f"  {kind:<7} median wall {wall:7.1f} ms   CPU {cpu:6.1f} ms   ({len(results[kind])} turns)")
    if only:
        return
    print(
        f"  drain / direct: wall {medians['drain'][0] / medians['direct'][0]:.2f}x, "
        f"CPU {medians['drain'][1] / medians['direct'][1]:.2f}x   (target 3: run <= 1.1x direct)"
    )


if __name__ == "__main__":
    main()
