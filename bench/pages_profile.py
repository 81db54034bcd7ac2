"""Profile one or more of bench/pages.py's pages in-process (pyinstrument), on its seeded database.
Not a test: it prints profiles.

    .venv/bin/python bench/pages_profile.py --only "conversation, 2,000" --requests 30
    .venv/bin/python bench/pages_profile.py --only inbox --html /tmp/inbox.html

Each page is requested --requests times (after 2 untimed) through Django's test client as the demo
approver, exactly as pages.py does, with pyinstrument sampling (1 ms) around the timed requests only.
Prints each page's CPU ms per request (p50) and the profile as text; --html writes pyinstrument's
HTML for the last page too. The seeded database must exist (run pages.py once first).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pages  # noqa: E402
from benchlib import pct  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--db", default=pages.DB)
    parser.add_argument("--tickets", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--only", default="", help="only pages whose label contains this text")
    parser.add_argument("--html", default="", help="write the last page's profile as HTML here")
    parser.add_argument("--show-all", action="store_true", help="print library frames too")
    parser.add_argument(
        "--cprofile", type=int, default=0, help="cProfile on CPU time instead; print this many functions by own time"
    )
    args = parser.parse_args()
    from pyinstrument import Profiler

    info = pages.setup(args.db, False, args.tickets, args.events)
    from django.contrib.auth.models import User
    from django.test import Client

    client = Client()
    client.force_login(User.objects.get(username="approver"))
    for label, url in pages.pages(info):
        if args.only and args.only not in label:
            continue
        htmx = url.endswith("#htmx")
        path = url.removesuffix("#htmx")
        headers = {"HX-Request": "true", "HX-Target": "inbox-results"} if htmx else {}
        for _ in range(2):
            client.get(path, headers=headers)
        profiler = cProfile.Profile(time.process_time) if args.cprofile else Profiler(interval=0.001)
        cpu = []
        profiler.enable() if args.cprofile else profiler.start()
        for _ in range(args.requests):
            started = time.process_time()
            response = client.get(path, headers=headers)
            cpu.append((time.process_time() - started) * 1000)
            assert response.status_code == 200, (url, response.status_code)
        profiler.disable() if args.cprofile else profiler.stop()
        print(f"\n===== {label}: {path}  CPU p50 {pct(cpu, 0.5):.1f} ms, min {min(cpu):.1f} ms per request")
        if args.cprofile:
            stats = pstats.Stats(profiler)
            stats.sort_stats("tottime").print_stats(args.cprofile)
            stats.sort_stats("cumulative").print_stats(args.cprofile)
            continue
        print(profiler.output_text(unicode=False, color=False, show_all=args.show_all))
        if args.html:
            Path(args.html).write_text(profiler.output_html())


if __name__ == "__main__":
    main()
