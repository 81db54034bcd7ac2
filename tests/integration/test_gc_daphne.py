"""The web process's garbage collector policy (adkweb.gcpolicy) in a real daphne process with real,
logged-in websockets: once they settle, their objects are frozen (out of the full collections'
walks), and over many connect/disconnect cycles the frozen objects do not grow: what closed sockets
leave in reference cycles is collected by the thaws (read from the process's /metrics)."""

from __future__ import annotations

import re
import sys

import httpx
from django.conf import settings
from django.test import Client
from websockets.sync.client import connect as ws_connect

from approvals.fanout import APPROVALS_GROUP
from tests.conftest import wait_for

from . import processes
from .test_fanout_processes import _members

TOKEN = "gc-test-metrics-token"
SETTLE = 0.3
SOCKETS = 25
CYCLES = 8


def _metric(host: str, name: str) -> float:
    text = httpx.get(f"http://{host}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10).text
    found = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    assert found, f"{name} not in /metrics"
    return float(found.group(1))


def _settled(host: str, settles: float) -> float:
    """Wait for the policy's next settle; the frozen objects then."""
    wait_for(lambda: _metric(host, "adkweb_gc_settles_total") > settles, timeout=20, what="the sockets to settle")
    return _metric(host, "adkweb_gc_frozen_objects")


def test_settled_sockets_are_frozen_and_closed_ones_do_not_pile_up(transactional_db, demo):
    client = Client()
    client.force_login(demo["approver"])
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    port = processes.free_port()
    env = processes.service_env(
        settings.REDIS_URL,
        ADKWEB_GC_SETTLE_SECONDS=str(SETTLE),
        ADKWEB_GC_THAW_CLOSES=str(SOCKETS * 2),
        ADKWEB_METRICS_TOKEN=TOKEN,
    )
    args = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "adkweb.asgi:application"]
    web = processes.Service(args, env, ready="Listening on TCP address").start()
    host = f"127.0.0.1:{port}"
    opened_frozen, closed_frozen = [], []
    try:
        started = _metric(host, "adkweb_gc_frozen_objects")
        for _ in range(CYCLES):
            settles = _metric(host, "adkweb_gc_settles_total")
            sockets = [
                ws_connect(
                    f"ws://{host}/ws/approvals/",
                    additional_headers={"Cookie": cookie, "Origin": f"http://{host}"},
                    open_timeout=20,
                )
                for _ in range(SOCKETS)
            ]
            opened_frozen.append(_settled(host, settles))
            settles = _metric(host, "adkweb_gc_settles_total")
            for ws in sockets:
                ws.close()
            closed_frozen.append(_settled(host, settles))
        thaws = _metric(host, "adkweb_gc_thaws_total")
    finally:
        wait_for(lambda: not _members(APPROVALS_GROUP), timeout=10, what="daphne to leave the inbox group")
        web.stop()
    print(f"frozen at start {started:.0f}; open {opened_frozen}; closed {closed_frozen}; thaws {thaws}")
    # Once settled, each open socket's objects (~180: consumer, protocol, tasks, scope, user) are frozen.
    frozen_per_socket = min(o - c for o, c in zip(opened_frozen[1:], closed_frozen, strict=False)) / SOCKETS
    assert frozen_per_socket > 100, frozen_per_socket
    assert thaws >= CYCLES // 2 - 1
    # A closed socket leaves ~95 objects in reference cycles, frozen until a thaw collects them: without
    # thaws the frozen objects grew by ~2,400 a cycle here, for ever; with them, by one cycle's at most.
    assert closed_frozen[-1] - min(closed_frozen) < 2 * SOCKETS * 100, closed_frozen
