"""Benchmark: the session store's seed flow (bench/session_store.py's) with REDIS_URL set, ADK's
DatabaseSessionService and ours, our store's publishing path as it was before phase 16 (publish) and as
it is, all in one process, flow by flow in a rotating order: the store's publishes compared where the
rest of the machine's load falls on every variant alike. Not a test: it prints figures.

    REDIS_URL=redis://127.0.0.1:6379/<db> DATABASE_URL=postgres://.../<name> \\
        .venv/bin/python bench/publish_ab.py [--flows 60] [--drain]

Variants (ours, same store, same database): `before`, the publish script through redis-py's client
and awaited at every batch's end, an event's hooks' questions asked in a round trip of their own;
`after`, this tree's path (adkweb.channel_layers.wire, adkweb.live's batches not waited for,
`ask_also`); `memory layer`, the in-memory channel layer (the store without its publishes to Redis; the
outbox task and a ticket's facts still go to Redis).
`--drain`: each turn as a worker's drain runs it (its publishes on a TurnPublisher, timed until sent).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import session_store as ss  # noqa: E402


async def main_async(args: argparse.Namespace, adk_db_url: str) -> None:
    from asgiref.sync import sync_to_async
    from channels.layers import channel_layers
    from django.db import connections
    from google.adk.runners import Runner
    from google.adk.sessions.database_session_service import DatabaseSessionService
    from google.genai import types

    from adkweb import live
    from adkweb.channel_layers import ThreadSafeInMemoryChannelLayer
    from agents_app import session_async, session_service
    from agents_app.session_service import DjangoSessionService

    sys.path.insert(0, str(ss.ROOT / "bench" / "agents"))
    from bench_reimbursement.agent import root_agent

    after_layer = channel_layers.make_backend("default")
    before_layer = channel_layers.make_backend("default")
    memory_layer = ThreadSafeInMemoryChannelLayer()
    connection = None

    async def redis_pys(keys: list[str], argv: list[Any], *, wait: bool = True) -> Any:
        """The script through redis-py's client, awaited (before phase 16)."""
        nonlocal connection
        connection = before_layer.connection(0)
        if before_layer._script is None:
            before_layer._script = connection.register_script(before_layer_script)
        return await before_layer._script(keys=keys, args=argv, client=connection)

    from adkweb.channel_layers.publish import SCRIPT as before_layer_script

    before_layer._run_script = redis_pys
    real_ask_also, real_send_many = session_service.ask_also, live._agroup_send_many

    async def waited(layer: Any, pairs: Any, ask: Any = None, *, soon: bool = False) -> Any:
        return await real_send_many(layer, pairs, ask)

    def variant(name: str) -> None:
        channel_layers.backends["default"] = {"before": before_layer, "after": after_layer}.get(name, memory_layer)
        session_service.ask_also = real_ask_also if name == "after" else (lambda groups: None)
        live._agroup_send_many = real_send_many if name == "after" else waited

    ours = DjangoSessionService()
    adk = DatabaseSessionService(db_url=adk_db_url)
    runners = {"adk database": Runner(app_name=ss.APP, agent=root_agent, session_service=adk)}
    for name in ("before", "after", "memory layer"):
        runners[name] = Runner(app_name=ss.APP, agent=root_agent, session_service=ours)

    async def turn(runner: Any, session: Any, message: Any) -> list[Any]:
        return await ss.seed_turn(runner, session, message, args.drain)

    async def flow(runner: Any) -> float:
        started = time.perf_counter()
        session = await runner.session_service.create_session(app_name=ss.APP, user_id="seed")
        text = types.Content(role="user", parts=[types.Part(text=ss.SEED_TEXT)])
        got = await turn(runner, session, text)
        call = next(c for e in got for c in e.get_function_calls() if c.id in (e.long_running_tool_ids or ()))
        fr = types.FunctionResponse(id=call.id, name=call.name, response={"status": "approved"})
        await turn(runner, session, types.Content(role="user", parts=[types.Part(function_response=fr)]))
        return (time.perf_counter() - started) * 1000

    names = list(runners)
    ms: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for i in range(args.flows + 2):  # two warm-up rounds
        for name in [names[(i + j) % len(names)] for j in range(len(names))]:
            variant(name)
            c = time.process_time()
            elapsed = await flow(runners[name])
            await live.apublished()
            if i >= 2:
                ms[name].append(elapsed)
                cpu[name].append((time.process_time() - c) * 1000)
    variant("after")
    base = statistics.median(ms["adk database"])
    print(f"{args.flows} seed flows each, {'as a drain' if args.drain else 'bare'}, rotating flow by flow")
    print(f"{'variant':<14}{'p50 ms':>10}{'p95 ms':>10}{'CPU ms':>10}{'/ADK p50':>10}{'/ADK p95':>10}")
    p95 = {n: sorted(v)[min(len(v) - 1, int(len(v) * 0.95))] for n, v in ms.items()}
    for name in names:
        p50 = statistics.median(ms[name])
        print(
            f"{name:<14}{p50:>10.2f}{p95[name]:>10.2f}{statistics.median(cpu[name]):>10.2f}"
            f"{p50 / base:>9.2f}x{p95[name] / p95['adk database']:>9.2f}x"
        )
    await adk.close() if hasattr(adk, "close") else None
    await sync_to_async(connections.close_all)()
    session_async.close_all()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flows", type=int, default=60)
    parser.add_argument("--drain", action="store_true", help="each turn as a worker's drain runs it")
    args = parser.parse_args()
    assert os.environ.get("REDIS_URL") and os.environ.get("DATABASE_URL"), "REDIS_URL and DATABASE_URL (PostgreSQL)"
    with tempfile.TemporaryDirectory(prefix="adkweb-bench-") as tmpdir:
        teardown = ss.django_setup(Path(tmpdir))
        adk_db_url = ss.adk_database_url()
        try:
            asyncio.run(main_async(args, adk_db_url))
        finally:
            teardown()
            ss.adk_database_drop()


if __name__ == "__main__":
    main()
