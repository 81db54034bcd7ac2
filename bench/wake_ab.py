"""Probe: a turn's wake-up through Redis (as adkweb does it) against PostgreSQL's NOTIFY, alternating turn
by turn in one run, on a throwaway table (not the app's). Not a test: it prints figures.

    BENCH_REDIS_URL=redis://127.0.0.1:6379/<db> .venv/bin/python bench/wake_ab.py [--turns 300]

The "web" sends a turn's write as one autocommit query (synchronous_commit off, as the message's COMMIT
is: adkweb.postgresql.pipelined), 50 ms apart so the worker is idle (cold) each time, and either
  redis:  reads the write's reply, then RPUSHes the wake-up; the worker's thread waits in BLPOP, then
          sends its claim (an UPDATE ... RETURNING of the row, committed asynchronously as the drain's claim is)
          on its own connection; or
  notify: the same query carries `SELECT pg_notify(...)` (delivered at its commit); the worker waits on
          a LISTEN connection's socket and sends its claim on that same connection.
Printed: write sent -> worker awake, and write sent -> claimed (perf_counter is CLOCK_MONOTONIC, one clock
for both processes), p50 / p95 ms, with the load average.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import select
import threading
import time

import psycopg
import redis
from benchlib import DB_PREFIX, PG_SERVER, REDIS_URL, pct

DB = f"{DB_PREFIX}_wake"
DSN = f"{PG_SERVER}/{DB}"
LIST, CHANNEL = "adkweb_bench_wake_ab", "adkweb_bench_wake_ab"
CLAIM = b"SET synchronous_commit TO off; UPDATE t SET s = 2 WHERE id = (SELECT max(id) FROM t) RETURNING id"


def _claim(conn: psycopg.Connection) -> float:
    conn.pgconn.send_query(CLAIM)
    while conn.pgconn.get_result() is not None:
        pass
    return time.perf_counter()


def worker(out: mp.Queue) -> None:
    """A worker process: a thread in BLPOP (redis) and the main thread on a LISTEN socket (notify)."""
    r = redis.Redis.from_url(REDIS_URL)
    claims = psycopg.connect(DSN, autocommit=True)

    def blpop() -> None:
        while True:
            _, value = r.blpop([LIST])
            awake = time.perf_counter()
            if value == b"stop":
                return
            out.put(("redis", float(value), awake, _claim(claims)))

    threading.Thread(target=blpop, daemon=True).start()
    conn = psycopg.connect(DSN, autocommit=True)
    conn.execute(f"LISTEN {CHANNEL}")
    while True:
        select.select([conn.pgconn.socket], [], [])
        awake = time.perf_counter()
        conn.pgconn.consume_input()
        found = []
        while (n := conn.pgconn.notifies()) is not None:
            found.append(n.extra)
        for extra in found:
            if extra == b"stop":
                return
            out.put(("notify", float(extra), awake, _claim(conn)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=300, help="turns in all, alternating (default 300)")
    args = parser.parse_args()
    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB}")
        c.execute(f"CREATE DATABASE {DB}")
    with psycopg.connect(DSN, autocommit=True) as c:
        c.execute("CREATE TABLE t (id bigserial PRIMARY KEY, s int, at timestamptz DEFAULT now())")
    out: mp.Queue = mp.Queue()
    proc = mp.Process(target=worker, args=(out,))
    proc.start()
    time.sleep(0.5)
    web, r = psycopg.connect(DSN, autocommit=True), redis.Redis.from_url(REDIS_URL)
    r.delete(LIST)
    seen: dict[str, tuple[list[float], list[float]]] = {"redis": ([], []), "notify": ([], [])}
    try:
        for i in range(args.turns):
            time.sleep(0.05)
            write = b"SET synchronous_commit TO off; INSERT INTO t (s) VALUES (1)"
            sent = time.perf_counter()
            if i % 2:
                web.pgconn.send_query(write + b"; SELECT pg_notify('%s', '%r')" % (CHANNEL.encode(), sent))
            else:
                web.pgconn.send_query(write)
            while web.pgconn.get_result() is not None:
                pass
            if not i % 2:
                r.rpush(LIST, repr(sent))
            kind, at, awake, claimed = out.get(timeout=10)
            if i >= 10:  # the first turns warm both ways up
                seen[kind][0].append((awake - at) * 1000)
                seen[kind][1].append((claimed - at) * 1000)
    finally:
        r.rpush(LIST, "stop")
        web.execute(f"NOTIFY {CHANNEL}, 'stop'")
        proc.join(5)
        web.close()
        with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {DB}")
    print(f"wake-ups, {args.turns} turns alternating, load {os.getloadavg()[0]:.2f}; ms p50 / p95")
    for kind, (awake, claimed) in seen.items():
        print(
            f"  {kind:6s}  sent -> awake {pct(awake, 0.5):5.2f} / {pct(awake, 0.95):5.2f}"
            f"   sent -> claimed {pct(claimed, 0.5):5.2f} / {pct(claimed, 0.95):5.2f}   n={len(awake)}"
        )
    ra, na = pct(seen["redis"][1], 0.5), pct(seen["notify"][1], 0.5)
    print(f"  claimed p50: notify {na:.2f} ms against redis {ra:.2f} ms ({na / ra:.2f}x)")


if __name__ == "__main__":
    main()
