"""Probe: what one round trip to PostgreSQL and to Redis costs after the machine has been idle for a while,
by the idle gap before it. Not a test: it prints figures, to read the other benches' latencies against.

    BENCH_REDIS_URL=redis://127.0.0.1:6379/<db> .venv/bin/python bench/rtt_gap.py [--samples 60]

`queue_probe.py` leaves 50 ms between turns so that its worker is idle ("cold"), as issue 12's queue stage
asks; a turn's way from the web's commit to the worker's claim is some four round trips that each start
after such a gap. How much a gap costs is the VM's, not adkweb's: on the VM of 2026-12-07 evening a
`SELECT 1` took 0.12 ms back to back and ~1 ms after 50 ms idle, with a core kept busy or not (the host's
scheduling and caches, not the guest's idle states). Printed per gap: the median of `SELECT 1` on one
connection and of Redis `PING`, alternating, and the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import psycopg
import redis
from benchlib import PG_SERVER, REDIS_URL

GAPS_MS = (0, 0.5, 2, 5, 10, 20, 50)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=60, help="round trips per gap and server (default 60)")
    args = parser.parse_args()
    pg = psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True)
    rd = redis.Redis.from_url(REDIS_URL)
    print(f"round trip after an idle gap, p50 ms ({args.samples} each; load {os.getloadavg()[0]:.2f})")
    print(f"{'gap ms':>8} {'PostgreSQL SELECT 1':>20} {'Redis PING':>12}")
    for gap in GAPS_MS:
        times: dict[str, list[float]] = {"pg": [], "redis": []}
        for _ in range(args.samples):
            for name, call in (("pg", lambda: pg.execute("SELECT 1").fetchone()), ("redis", rd.ping)):
                time.sleep(gap / 1000)
                start = time.perf_counter()
                call()
                times[name].append((time.perf_counter() - start) * 1000)
        print(f"{gap:>8} {statistics.median(times['pg']):>20.3f} {statistics.median(times['redis']):>12.3f}")
    print(f"(load at the end {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
