"""Benchmark: live fan-out to 1,000 websockets, and click-to-resume, against a real ASGI server in
services mode. Not a test: it prints figures.

    .venv/bin/python bench/fanout.py [--sockets 1000] [--rounds 3] [--resume 30] [--timeout 90]
    .venv/bin/python bench/fanout.py --sockets 100 --rounds 2 --resume 10           # quick

Starts daphne (one process) and a `celery worker`
(BENCH_CELERY_POOL: threads as in production, or prefork; --concurrency 2) on PostgreSQL
(adkweb_bench_fanout, created and dropped) and Redis (BENCH_REDIS_URL, default DB 5), then:

  conversation  N sockets (the approver's session cookie) watch one stock_agent conversation; the
                requester posts a message through the page's form (POST /sessions/<pk>/messages/, htmx);
                per socket: POST sent -> the frame carrying that message's event received.
  inbox         N sockets on the approvals inbox (/ws/approvals/); the requester's message opens a ticket
                (per socket: POST sent -> the new row received), then an approver approves it through
                the ticket page (POST /tickets/<id>/approve/, htmx; per socket: POST sent -> the frame
                re-rendering that ticket's row received).
  resume        one socket on a conversation waiting on a ticket; POST approve -> the first resumed
                event on the socket (click to resume), --resume times, each on a new conversation;
                split with the Turn row and the stored event's timestamps.

A frame not received within --timeout seconds is missed. Memory: the web process's RSS before the
sockets, with them open, and after the round. See bench/README.md.

    --tree /work/base-NAME   the servers run that source tree (the same client, to compare two trees)
    --base /work/base-NAME   resume: a second daphne + worker from that tree, on the same database and
                             the Redis DB of BENCH_REDIS_URL_BASE (default: BENCH_REDIS_URL's + 1), the
                             clicks alternating between the two (after / before in one run)
    --gc-log                 the web process's garbage collections (bench/gcprobe): per round, those
                             that started while its frames were on their way, and every one of the run
    --probe                  resume: when each step of a click started and ended in the web process
                             and the worker (bench/resumeprobe), p50 ms after the POST was sent
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import resource
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import (  # noqa: E402
    BIN,
    DB_PREFIX,
    REDIS_URL,
    ROOT,
    Server,
    adkweb_env,
    celery_worker_cmd,
    cpu_seconds,
    free_port,
    pct,
    pg_create,
    pg_drop,
    redis_flush,
    rss_mb,
)
from fanout_probes import GC_PROBE, STAGE_PROBE, GcLog, StageProbe  # noqa: E402
from fanout_resume import EVENT_FRAME, new_ticket, resume, warm_up  # noqa: E402
from wsclients import Profile, Socket, Web, close_all, open_sockets, report, settle, wait_all  # noqa: E402

DB = f"{DB_PREFIX}_fanout"


def django_setup(env: dict[str, str]) -> dict[str, str]:
    """Django in this process on the bench database: migrate, demo users; returns session cookies."""
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import Client

    from agents_app.demo.setup import demo_setup

    call_command("migrate", verbosity=0, interactive=False)
    demo_setup()
    cookies = {}
    for name in ("approver", "requester"):
        client = Client()
        client.force_login(User.objects.get(username=name))
        cookies[name] = client.cookies["sessionid"].value
    return cookies


async def fanout(args: argparse.Namespace, base: str, ws: str, cookies: dict[str, str], web: Server) -> None:

    web_pid = web.pid
    requester, approver = Web(base, cookies["requester"]), Web(base, cookies["approver"])
    print(f"{'round':<44}{'sockets':>7}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}{'missed':>8}   target")
    mem = {"web RSS before sockets": rss_mb(web_pid)}
    await warm_up(requester, approver)
    if "conversation" in args.only:
        for cycle in range(args.cycles):  # each with sockets of its own (connect, rounds, close)
            if args.cycles > 1:
                print(f"cycle {cycle + 1} of {args.cycles} (load average {load()})")
            await conversation_watchers(args, base, ws, cookies, web_pid, mem, requester)
            if args.cycles > 1:
                await asyncio.sleep(2.0)  # the server has seen the closes
                after = f"web RSS after cycle {cycle + 1}: {rss_mb(web_pid):.0f} MiB"
                print(f"  ({after}" + (f"; {args.gc.census(web_pid, 'objects tracked')}" if args.gc else "") + ")")
    if "inbox" in args.only:
        await inbox_watchers(args, ws, cookies, web_pid, mem, requester, approver)
    print("\nweb process memory (RSS, MiB): " + "; ".join(f"{k} {v:.0f}" for k, v in mem.items()))
    if args.gc is not None:
        args.census.append(args.gc.census(web_pid, "at the end"))
        print("web GC, objects tracked: " + "; ".join(args.census))
        print(f"web GC, the whole run: {args.gc.summary()}")
    await requester.client.aclose()
    await approver.client.aclose()
    if Socket.missed or Socket.dropped:
        print(f"--- frames were missed or sockets dropped: the web process's log (tail) ---\n{web.tail(4000)}")


async def conversation_watchers(  # noqa: PLR0913
    args: argparse.Namespace, base: str, ws: str, cookies: dict, web_pid: int, mem: dict, requester: Web
) -> None:
    from asgiref.sync import sync_to_async

    from agents_app.services import session_create

    origin = base
    chat = await sync_to_async(session_create)(app_name="stock_agent", user_id="requester")
    page = f"/sessions/{chat.pk}/"
    started = time.perf_counter()
    sockets = await open_sockets(args.sockets, f"{ws}/ws/sessions/{chat.pk}/", cookies["approver"], origin)
    # A socket watches once its connect frame (the status) came: a busy server accepts first and reads
    # the page's state after, and a socket whose state is read after a round's event was stored shows
    # that event in its whole list, not in the appended frame the round looks for.
    shown = await wait_all(sockets, 'id="session-status"', 0.0, args.timeout)
    connect_s = time.perf_counter() - started
    if None in shown:
        print(f"  ({shown.count(None)} sockets got no connect frame within {args.timeout:.0f} s)")
    await settle(sockets)
    mem[f"web RSS with {args.sockets} conversation sockets"] = rss_mb(web_pid)
    if args.gc is not None:
        args.census.append(args.gc.census(web_pid, f"{args.sockets} conversation sockets", args.types))
    profile = Profile(args.profile, "web-conversation", web_pid) if args.profile else None
    stages: list[str] = []
    cpu_turn: list[str] = []  # the web process's CPU (to the last socket's event frame / the whole turn)
    for r in range(args.rounds):
        token = f"fanout{r}x{uuid.uuid4().hex[:6]}"
        # The frame of the stored event (appended to the conversation) that carries this message.
        needle = (token, EVENT_FRAME)
        cpu = cpu_seconds(web_pid)
        sent, sent_wall = time.perf_counter(), time.time()
        await requester.post(f"{page}messages/", {"text": f"What is the price of GOOG? {token}"}, page)
        posted = time.perf_counter()
        got = await wait_all(sockets, needle, sent, args.timeout)
        cpu_event = cpu_seconds(web_pid) - cpu
        label = f"conversation: message -> its event, round {r + 1}"
        ms = report(label, sent, got, "p95 <= 250 ms, 0 missed", sockets, needle)
        claimed, stored = await sync_to_async(user_event_times)(chat.pk, token)
        if args.gc is not None:
            args.gc.report(sent_wall, ms)
        stages.append(
            f"POST answered {(posted - sent) * 1000:.0f}, turn claimed {(claimed - sent_wall) * 1000:.0f}, "
            f"event stored {(stored - sent_wall) * 1000:.0f}, first frame {min(ms, default=float('nan')):.0f}, "
            f"stored -> p95 frame {pct(ms, 0.95) - (stored - sent_wall) * 1000:.0f}"
        )
        await settle(sockets)
        frames = sum(at >= sent for at, _ in sockets[0].frames)
        cpu_turn.append(
            f"{cpu_event:.2f} / {cpu_seconds(web_pid) - cpu:.2f} s, {frames} frames, RSS {rss_mb(web_pid):.0f} MiB"
        )
    if profile is not None:
        profile.stop()
    mem[f"web RSS after {args.rounds} rounds"] = rss_mb(web_pid)
    print("  (ms after the POST, per round: " + "; ".join(stages) + ")")
    print(
        "  (web process CPU per round, to the event at every socket / the whole turn; frames per socket: "
        + "; ".join(cpu_turn)
        + ")"
    )
    await close_all(sockets, connect_s)


def user_event_times(session_pk: int, token: str) -> tuple[float, float]:
    """When the worker claimed the message's turn and stored its event (the Turn row, the event's
    ADK timestamp: the clock of this machine)."""
    from agents_app.models import StoredEvent

    event = StoredEvent.objects.select_related("turn").get(session_id=session_pk, author="user", data__icontains=token)
    return event.turn.started_at.timestamp(), event.timestamp


async def inbox_watchers(  # noqa: PLR0913
    args: argparse.Namespace, ws: str, cookies: dict, web_pid: int, mem: dict, requester: Web, approver: Web
) -> None:
    origin = requester.client.base_url
    origin = f"{origin.scheme}://{origin.host}:{origin.port}"
    started = time.perf_counter()
    sockets = await open_sockets(args.sockets, f"{ws}/ws/approvals/", cookies["approver"], origin)
    connect_s = time.perf_counter() - started
    # An inbox socket sends nothing when it connects, and the server accepts it before it reads its
    # page and counts (one database thread for all of them): wait until the web process is idle, or
    # round 1 measures sockets still connecting (they then count from the database: seconds).
    idle_s = await web_idle(web_pid)
    await settle(sockets)
    mem[f"web RSS with {args.sockets} inbox sockets"] = rss_mb(web_pid)
    if args.gc is not None:
        args.census.append(args.gc.census(web_pid, f"{args.sockets} inbox sockets", args.types))
    print(f"  (inbox sockets: the web process was idle {idle_s:.1f} s after the last handshake)")
    profile = Profile(args.profile, "web-inbox", web_pid) if args.profile else None
    target = "p95 <= 250 ms, 0 missed"
    for r in range(args.rounds):
        # Each round: a message opens a ticket (every inbox shows its new row), then it is approved.
        # Approving before every socket has shown the row would measure nothing: a consumer that
        # reaches the new ticket only after it was decided rightly never shows it.
        sent, sent_wall = time.perf_counter(), time.time()
        _session_pk, ticket_pk, _ = await new_ticket(requester)
        added = re.compile(rf'<tr id="pending-call-{ticket_pk}" class="row-pending')
        got = await wait_all(sockets, added, sent, args.timeout)
        ms = report(f"inbox: message -> the new ticket's row, round {r + 1}", sent, got, target, sockets)
        if args.gc is not None:
            args.gc.report(sent_wall, ms)
        await settle(sockets)
        decided = re.compile(rf'<tr id="pending-call-{ticket_pk}" class="row-approved')
        page = f"/tickets/{ticket_pk}/"
        sent, sent_wall = time.perf_counter(), time.time()
        await approver.post(f"{page}approve/", {"approve-comment": ""}, page)
        got = await wait_all(sockets, decided, sent, args.timeout)
        ms = report(f"inbox: approve -> the row's update, round {r + 1}", sent, got, target, sockets)
        if args.gc is not None:
            args.gc.report(sent_wall, ms)
        await settle(sockets)
    if profile is not None:
        profile.stop()
    await close_all(sockets, connect_s)


async def web_idle(pid: int, limit: float = 120) -> float:
    """Wait until the web process uses under 10% of a core for a second; the seconds it took."""
    started = time.perf_counter()
    before = cpu_seconds(pid)
    while time.perf_counter() - started < limit:
        await asyncio.sleep(1.0)
        now = cpu_seconds(pid)
        if now - before < 0.1:
            break
        before = now
    return time.perf_counter() - started


def load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def git_head(tree: Path) -> str:
    import subprocess

    done = subprocess.run(["git", "-C", str(tree), "log", "-1", "--format=%h %s"], capture_output=True, text=True)
    return done.stdout.strip()[:60] or "?"


def base_target(args: argparse.Namespace, env: dict[str, str], servers: list[Server]) -> tuple[str, str, str]:
    """--base: the other tree's daphne and worker, on the same database (its users, sessions and cookies)
    and a Redis DB of their own (their wake-ups, Celery queue and channel layer apart)."""
    tree = Path(args.base).resolve()
    redis_url = os.environ.get("BENCH_REDIS_URL_BASE") or re.sub(
        r"/(\d+)$", lambda m: f"/{int(m.group(1)) + 1}", REDIS_URL
    )
    redis_flush(redis_url)
    other = dict(env, REDIS_URL=redis_url, CHANNELS_PREFIX="adkweb-bench-fanout-base")
    other["PYTHONPATH"] = env["PYTHONPATH"].replace(str(Path(args.tree).resolve() if args.tree else ROOT), str(tree))
    port = free_port()
    web = Server("web-base", [str(BIN / "daphne"), "-p", str(port), "adkweb.asgi:application"], other, port, tree)
    servers += [web.start(), Server("worker-base", celery_worker_cmd(), other, cwd=tree).start()]
    web.wait_port()
    print(f"--base: servers from {tree} ({git_head(tree)}), daphne pid {web.pid} on port {port}, Redis {redis_url}")
    if args.probe is not None:
        args.probe.pids.update({str(web.pid): "web", str(servers[-1].pid): "worker"})
    return f"{tree.name} (--base)", f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sockets", type=int, default=1000, help="websockets per audience (default 1000)")
    parser.add_argument("--rounds", type=int, default=3, help="messages / decisions per audience (default 3)")
    parser.add_argument("--resume", type=int, default=30, help="click-to-resume samples (default 30; 0 skips)")
    parser.add_argument("--timeout", type=float, default=90, help="a frame later than this is missed (default 90 s)")
    parser.add_argument(
        "--only", default="conversation,inbox,resume", help="parts to run (default conversation,inbox,resume)"
    )
    parser.add_argument("--profile", default="", help="py-spy the web process during the rounds: PREFIX")
    parser.add_argument("--cycles", type=int, default=1, help="conversation: connect, rounds, close; N times")
    parser.add_argument("--tree", default="", help="the servers run this source tree (default: this one)")
    parser.add_argument("--gc-log", action="store_true", help="log the web process's garbage collections")
    parser.add_argument("--types", action="store_true", help="with --gc-log: the commonest objects' types")
    parser.add_argument("--probe", action="store_true", help="resume: each step's times (bench/resumeprobe)")
    parser.add_argument("--base", default="", help="resume: also from this tree, clicks alternating")
    args = parser.parse_args()
    args.probe = StageProbe() if args.probe else None
    args.gc, args.census = (GcLog() if args.gc_log else None), []
    tree = Path(args.tree).resolve() if args.tree else ROOT
    print(f"servers from {tree} ({git_head(tree)}); load average {load()}")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = max(soft, min(hard, 4 * args.sockets + 1024))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))  # inherited by the servers
    redis_flush(REDIS_URL)
    env = adkweb_env(
        pg_create(DB), REDIS_URL, root=tree, ADKWEB_EMBEDDED_WORKER="false", CHANNELS_PREFIX="adkweb-bench-fanout"
    )
    if args.probe is not None:
        env.update(PYTHONPATH=os.pathsep.join([str(STAGE_PROBE), env["PYTHONPATH"]]), BENCH_PROBE_LOG=args.probe.path)
    web_env = dict(env)
    if args.gc is not None:
        web_env.update(PYTHONPATH=os.pathsep.join([str(GC_PROBE), env["PYTHONPATH"]]), BENCH_GC_LOG=args.gc.path)
    servers: list[Server] = []
    try:
        cookies = django_setup(env)
        port = free_port()
        web = Server("web", [str(BIN / "daphne"), "-p", str(port), "adkweb.asgi:application"], web_env, port, tree)
        servers = [web.start(), Server("worker", celery_worker_cmd(), env, cwd=tree).start()]
        web.wait_port()
        base, ws = f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}"
        print(f"daphne pid {web.pid} on {base}, celery worker pid {servers[1].pid}; fd limit {want}")
        if args.probe is not None:
            args.probe.pids.update({str(web.pid): "web", str(servers[1].pid): "worker"})
        args.web_pid = web.pid
        if "conversation" in args.only or "inbox" in args.only:
            asyncio.run(fanout(args, base, ws, cookies, web))
        targets = [(f"{tree.name}", base, ws)]
        if args.base:
            targets.append(base_target(args, env, servers))
        if args.resume and "resume" in args.only:
            asyncio.run(resume(args, targets, cookies))
    except BaseException:
        for s in servers:
            sys.stderr.write(f"--- {s.name} output ---\n{s.tail()}\n")
        raise
    finally:
        for s in servers:
            s.stop()
        print(f"load average at the end {load()}")
        if args.gc is not None:
            print(f"web GC log: {args.gc.path}")
        from django.db import connections

        connections.close_all()
        pg_drop(DB)


if __name__ == "__main__":
    main()
