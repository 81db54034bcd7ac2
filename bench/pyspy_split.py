"""Split a py-spy raw profile (collapsed stacks) of adkweb processes into named buckets, first match wins.
Not a test: a reading aid for bench/README.md.

    .venv/bin/python bench/pyspy_split.py /tmp/worker.txt [--buckets worker|web]
"""

from __future__ import annotations

import argparse
import re
from collections import Counter

IDLE = re.compile(r"(select|epoll|poll|_wait|wait_for|sleep|accept|thread\.py:\d+\)$|Condition\.wait|_worker \()")
BUCKETS = {
    "worker": [
        ("connect to PostgreSQL", r"psycopg/connection\.py.*connect|Connection\.connect"),
        ("publish after commit (channel layer, Redis)", r"agents_app/events\.py|approvals/events\.py"),
        ("enqueue / broker", r"kombu/|celery/app/task\.py.*apply_async"),
        ("session store: append_event (+ ticket hook)", r"_store_event|append_event"),
        ("session store: get_session", r"_get_session|get_session \("),
        ("claim / finish turn, lease", r"turn_claim_next|turn_finish|lease_acquire|lease_release|QuerySet\.exists"),
        ("build agent", r"build_agent|_build_config"),
        ("ADK runner (agent, model, tools)", r"google/adk/"),
        ("asyncio.run / event loop setup", r"asyncio/runners\.py"),
        ("celery, billiard (task plumbing)", r"celery/|billiard/"),
    ],
    "web": [
        ("connect to PostgreSQL", r"psycopg/connection\.py.*connect|Connection\.connect"),
        ("templates (render_to_string)", r"django/template/"),
        ("Django ORM queries (views, consumers)", r"django/db/"),
        ("channel layer (Redis)", r"channels_redis/|redis/"),
        ("websocket protocol (daphne, autobahn, twisted)", r"autobahn/|daphne/|twisted/"),
        ("adkweb code: other", r"agents_app/|approvals/"),
        ("asgiref thread hops", r"asgiref/"),
    ],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile")
    parser.add_argument("--buckets", choices=sorted(BUCKETS), default="worker")
    args = parser.parse_args()
    rules = [(name, re.compile(rx)) for name, rx in BUCKETS[args.buckets]]
    counts: Counter[str] = Counter()
    for line in open(args.profile, encoding="utf-8", errors="replace"):
        stack, _, n = line.rstrip("\n").rpartition(" ")
        if not n.isdigit():
            continue
        frames = stack.split(";")
        if IDLE.search(frames[-1].strip()):
            continue
        name = next((name for name, rx in rules if rx.search(stack)), "other")
        counts[name] += int(n)
    total = sum(counts.values())
    print(f"{total} non-idle samples (wall-clock, all threads)")
    for name, n in counts.most_common():
        print(f"{100 * n / total:>6.1f}%  {name}")


if __name__ == "__main__":
    main()
