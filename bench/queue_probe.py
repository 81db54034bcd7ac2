"""Probe: where the milliseconds between a Turn's commit and its claim go, services mode (PostgreSQL,
Redis, a real `celery worker` with the threads pool), one turn in flight. Not a test: it prints figures.

    BENCH_REDIS_URL=redis://127.0.0.1:6379/<db> .venv/bin/python bench/queue_probe.py [--turns 40]
        [--base /path/to/other/tree] [--rounds 2]

Each turn (stock_agent, offline demo model) is sent with services.message_send; the web side stamps
the Turn row's creation (created_at), the end of its commit, the start and end of the enqueue (after
the commit, or before it where agents_app.enqueue.wake_before_commit says so), when its COMMIT
left and when its reply came (Django's `_commit`), and when message_send returned (the web may
answer); the worker (bench/queue_probe_app.py) stamps when Celery's consumer received the drain's
message, when its wake-up was popped (by the listener or a drainer), when a pool thread started it,
when the drain started, around the claim (runner._start / _astart) and its end; the Turn row's started_at (the claim's
UPDATE, the database's clock_timestamp()) splits the claim; the turn's statement (its BEGIN leading
it) is stamped as it leaves and as its reply is in; with --claim-marks the claim's statement carries
three SELECTs of the database's clock (when it started, its lock granted, its end: a probe only, the
statement a little longer). The queue stage is row created (the
Turn's created_at, taken before the transaction's BEGIN) -> the claim returned to the drain. With
--base the same is run on another tree (e.g. a worktree of main), alternating. With --alternate-commit
the message's COMMIT alternates turn by turn, in one process, between its two ways (adkweb.postgresql.pipelined:
asynchronous with the flush riding after it, and waiting for its own flush as where the role may not call
the flush function), each printed apart.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def child(tree: Path, turns: int) -> dict:
    """In a subprocess whose sys.path starts at `tree`: run the probe, return the figures."""
    sys.path.insert(0, str(tree))
    sys.path.insert(1, str(HERE))
    os.chdir(tree)
    from turn_path import django_setup  # the throwaway PostgreSQL database of turn_path.py

    teardown = django_setup(Path(tempfile.gettempdir()), root=tree)
    try:
        return _probe(tree, turns)
    finally:
        teardown()


def _probe(tree: Path, turns: int) -> dict:
    import redis
    from django.db import connection, transaction

    from agents_app import services
    from agents_app.demo.setup import demo_setup
    from agents_app.models import Turn

    demo_setup()
    client = redis.Redis.from_url(os.environ["REDIS_URL"], socket_timeout=330)  # redis-py 8 reads 5 s by default
    client.flushdb()
    web: dict[int, dict] = {}
    from benchlib import enqueue_module

    queueing = enqueue_module()
    enqueue = queueing.session_enqueue

    sending: list[float] = []

    def probed_enqueue(*, session_pk: int) -> bool:
        stamps = web.setdefault(session_pk, {})
        stamps["enqueue"], cpu = time.time(), time.thread_time()
        # woken after the commit (not as its COMMIT left: adkweb.postgresql.base.on_commit_sent)
        if not transaction.get_connection().in_atomic_block and len(sending) != 1:
            stamps["commit"] = stamps["enqueue"]
        try:
            return enqueue(session_pk=session_pk)
        finally:
            stamps["sent"], stamps["send_cpu"] = time.time(), (time.thread_time() - cpu) * 1000

    queueing.session_enqueue = probed_enqueue
    _probe_statement(web)
    commit = connection._commit

    def probed_commit():  # when the web's COMMIT leaves (Django's atomic block's end) and its reply came
        sending.append(time.time())
        try:
            return commit()
        finally:
            sending.append(time.time())

    connection._commit = probed_commit
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{HERE}", "DATABASE_URL": _test_url(connection)}
    args = [sys.executable, "-m", "celery", "-A", "queue_probe_app", "worker", "-Q", "agents", "--concurrency", "2"]
    args += ["--loglevel", "WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat"]
    log = tempfile.TemporaryFile(mode="w+")
    worker = subprocess.Popen(args, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)
    rows: list[dict] = []
    cpu_before = 0.0
    alternate = os.environ.get("PROBE_ALTERNATE_COMMIT") == "1"
    try:
        for i in range(turns + 3):  # 3 warm-up turns
            if alternate:
                from adkweb.postgresql import pipelined

                pipelined._flushing[:] = [i % 2 == 0]
            session = services.session_create(app_name="stock_agent", user_id="requester")
            time.sleep(0.05)  # an idle worker
            web[session.pk] = {"t0": time.time()}
            sending.clear()
            turn = services.message_send(session=session, text="What is the price of GOOG?", streaming=False)
            web[session.pk]["answer"] = time.time()  # message_send returned: the web may answer
            if sending:  # unless the COMMIT left with the turn's statement (_probe_statement)
                web[session.pk].setdefault("commit_sent", sending[0])
                web[session.pk].setdefault("commit", sending[1])
            got = client.blpop("probe:done", timeout=300 if i == 0 else 30)
            if got is None:
                log.seek(0)
                raise RuntimeError("no drain finished: " + log.read()[-3000:])
            stamps = {**web[session.pk], **json.loads(got[1])}
            row = Turn.objects.get(pk=turn.pk)
            stamps["created"] = row.created_at.timestamp()
            stamps["started_db"] = row.started_at.timestamp()  # the claim's UPDATE (clock_timestamp())
            stamps["flush_rides"] = alternate and i % 2 == 0
            if i >= 3:
                rows.append(stamps)
            if i == 2:
                cpu_before = _cpu_ms(worker.pid)
        cpu = _cpu_ms(worker.pid) - cpu_before
    finally:
        worker.terminate()
        worker.wait(30)
        log.close()
    return {"rows": rows, "worker_cpu_ms_total": cpu}


def _probe_statement(web: dict[int, dict]) -> None:
    """Stamp when the turn's statement (its BEGIN leading it) leaves and when its reply is in."""
    from agents_app import turn_insert

    begun_with = getattr(turn_insert, "begun_with", None)
    if begun_with is None:  # a tree whose turn statement goes otherwise: no split
        return

    def probed(cursor, sql, params):
        stamps = web.setdefault(params["session"], {})
        stamps["statement"] = time.time()
        try:
            return begun_with(cursor, sql, params)
        finally:
            stamps["statement_done"] = time.time()

    turn_insert.begun_with = probed
    committed_with = getattr(turn_insert, "committed_with", None)
    if committed_with is None:
        return

    def probed_committed(cursor, sql, params, written, *prepared):  # BEGIN, the statement and its COMMIT in one write
        stamps = web.setdefault(params["session"], {})

        def stamped(results):
            stamps["statement_done"] = time.time()
            return written(results)

        stamps["statement"] = stamps["commit_sent"] = time.time()
        try:
            return committed_with(cursor, sql, params, stamped, *prepared)
        finally:
            stamps["commit"] = time.time()

    turn_insert.committed_with = probed_committed


def _test_url(connection) -> str:
    s = connection.settings_dict
    return f"postgres://{s['USER'] or 'postgres'}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


def _cpu_ms(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


STAGES = [  # label, from, to
    ("row created -> commit done", "created", "commit"),
    ("row created -> enqueue starts", "created", "enqueue"),
    ("  row created -> turn statement sent", "created", "statement"),
    ("  turn statement (BEGIN + insert): its round trip", "statement", "statement_done"),
    ("  its reply -> enqueue starts", "statement_done", "enqueue"),
    ("enqueue (web: send_task / wake-up)", "enqueue", "sent"),
    ("COMMIT sent -> commit done (its reply)", "commit_sent", "commit"),
    ("sent -> Celery consumer received", "sent", "received"),
    ("received -> pool thread starts the task", "received", "prerun"),
    ("task start -> drain starts", "prerun", "drain"),
    ("sent -> drain starts (whatever the path)", "sent", "drain"),
    ("  sent -> wake-up popped", "sent", "popped"),
    ("  popped -> drain starts (pool thread; drainer)", "popped", "drain"),
    ("drain start -> claim statement sent", "drain", "claim_start"),
    ("claim statement (may wait for the commit)", "claim_start", "claimed"),
    ("QUEUE STAGE: row created -> claimed", "created", "claimed"),
    ("row created -> message_send returned (web answers)", "created", "answer"),
    ("row created -> drain ended (turn done, published)", "created", "end"),
    ("commit done -> claimed", "commit", "claimed"),
    ("  COMMIT sent -> claim's UPDATE (database clock)", "commit_sent", "started_db"),
    ("  claim's UPDATE -> claimed (statement end, reply, parse)", "started_db", "claimed"),
    # --claim-marks: the claim's statement stamped by the database's clock (queue_probe_app.marked_claim)
    ("claim sent -> the database starts it", "claim_sent", "db_received"),
    ("  commit done -> the database starts the claim", "commit", "db_received"),
    ("  the claim's start -> its lock statement", "db_received", "db_lock"),
    ("  its lock statement (waits for the commit)", "db_lock", "db_locked"),
    ("  COMMIT sent -> the claim's lock granted", "commit_sent", "db_locked"),
    ("  lock granted -> the claim's UPDATE", "db_locked", "started_db"),
    ("  the claim's UPDATE -> its statement done", "started_db", "db_done"),
    ("  statement done -> its reply read", "db_done", "claim_reply"),
    ("  reply read -> claimed (parse)", "claim_reply", "claimed"),
]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def summary(label: str, result: dict) -> dict[str, str]:
    rows = result["rows"]
    out = {}
    for name, a, b in STAGES:
        vals = [(r[b] - r[a]) * 1000 for r in rows if r.get(a) and r.get(b)]
        out[name] = f"{pct(vals, 0.5):6.2f} / {pct(vals, 0.95):6.2f}" if vals else "     -"
    send_cpu = [r["send_cpu"] for r in rows]
    out["web CPU of the enqueue, ms"] = f"{pct(send_cpu, 0.5):6.2f} / {pct(send_cpu, 0.95):6.2f}"
    out["worker process CPU per turn, ms (mean)"] = f"{result['worker_cpu_ms_total'] / max(len(rows), 1):6.1f}"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--base", help="another tree (a worktree of main) to probe alternately")
    parser.add_argument(
        "--claim-marks",
        action="store_true",
        help="stamp the claim's statement by the database's clock (three SELECTs added to it: a probe only)",
    )
    parser.add_argument(
        "--alternate-commit",
        action="store_true",
        help="alternate the message's COMMIT turn by turn: asynchronous with its flush after it / waiting for it",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("PROBE " + json.dumps(child(Path(args.child), args.turns)))
        return
    env = {
        **os.environ,
        "REDIS_URL": os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/5"),
        "DATABASE_URL": os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
        + "/"
        + os.environ.get("BENCH_DB_PREFIX", "adkweb_bench")
        + "_probe",
        "LOG_LEVEL": "WARNING",
        "PROBE_CLAIM_MARKS": "1" if args.claim_marks else "",
        "PROBE_ALTERNATE_COMMIT": "1" if args.alternate_commit else "",
    }
    trees = [("this tree", HERE.parent)] + ([("base", Path(args.base).resolve())] if args.base else [])
    results: dict[str, list[dict]] = {label: [] for label, _ in trees}
    for r in range(args.rounds):
        for label, tree in trees if r % 2 == 0 else list(reversed(trees)):
            load = os.getloadavg()[0]
            cmd = [sys.executable, str(HERE / "queue_probe.py"), "--turns", str(args.turns), "--child", str(tree)]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
            line = next((x for x in out.stdout.splitlines() if x.startswith("PROBE ")), None)
            if line is None:
                sys.exit(f"{label}: probe failed\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
            res = json.loads(line[6:])
            res["load"] = load
            if not args.alternate_commit:
                results[label].append(res)
                continue
            for rides, way in ((True, "COMMIT asynchronous, flush after it"), (False, "COMMIT waits for its flush")):
                part = {**res, "rows": [x for x in res["rows"] if x["flush_rides"] is rides]}
                results.setdefault(f"{label}, {way}", []).append(part)
    print(f"{args.turns} turns per run, one in flight, worker concurrency 2 (threads); p50 / p95 ms")
    for label, runs in results.items():
        for i, res in enumerate(runs):
            if not res["rows"]:
                continue
            print(f"\n{label}, run {i + 1} (load {res['load']:.2f}):")
            for name, value in summary(label, res).items():
                print(f"  {name:48s} {value}")


if __name__ == "__main__":
    main()
