"""The Celery app of bench/queue_probe.py's worker: adkweb's, with probes that stamp when a drain's
message is received, its wake-up popped (by the listener, older trees; by a drainer), its drain
started (on a pool thread; on the drainer's loop) and its turn claimed. Not used by the app."""

from __future__ import annotations

import json
import os
import threading
import time

import redis
from celery import signals

from adkweb.celery import app  # noqa: F401 - the app celery -A loads

_client = redis.Redis.from_url(os.environ["REDIS_URL"])
_local = threading.local()
_received: dict[str, float] = {}  # task id -> when the consumer received it
_by_session: dict[int, dict] = {}  # session pk -> the stamps of its drain in progress
_popped: dict[int, float] = {}  # session pk -> when its wake-up was popped (the listener's, a drainer's)


@signals.task_received.connect
def _on_received(request=None, **_):
    _received[request.id] = time.time()


@signals.task_prerun.connect
def _on_prerun(task_id=None, task=None, **_):
    if task is not None and task.name.endswith("session_drain"):
        _local.celery = {"received": _received.pop(task_id, 0.0), "prerun": time.time()}


@signals.worker_process_init.connect
@signals.worker_init.connect
def _patch(**_):
    from agents_app import runner, wake_worker

    if getattr(runner, "_probed", False):
        return
    runner._probed = True
    listener = getattr(wake_worker, "Listener", None)  # a listener thread handing wake-ups to the pool (older)
    if listener is not None:
        hand_over = listener._hand_over

        def probed_hand_over(self, list_key, session_pk):
            _popped[session_pk] = time.time()
            return hand_over(self, list_key, session_pk)

        listener._hand_over = probed_hand_over
    if getattr(wake_worker, "Drainers", None) is not None:  # drainers popping and draining on their loops
        _patch_drainers()
    drain, start = runner.session_turns_run, runner._start

    def probed_drain(session_pk):
        stamps = _drain_stamps(session_pk)
        cpu = time.thread_time()
        try:
            return drain(session_pk)
        finally:
            _drain_done(stamps, cpu)

    def probed_start(session_pk, owner):
        stamps = _by_session.get(session_pk)
        if stamps is not None:
            stamps.setdefault("claim_start", time.time())
        out = start(session_pk, owner)
        if stamps is not None:
            stamps.setdefault("claimed", time.time())
        return out

    runner.session_turns_run = probed_drain
    runner._start = probed_start
    # The claim from the worker loop (phase 13 (worker)); the thread's _start otherwise.
    astart = getattr(runner, "_astart", None)
    if astart is not None:

        async def probed_astart(session_pk, owner):
            stamps = _by_session.get(session_pk)
            if stamps is not None:
                stamps.setdefault("claim_start", time.time())
            out = await astart(session_pk, owner)
            if stamps is not None:
                stamps.setdefault("claimed", time.time())
            return out

        runner._astart = probed_astart
    if os.environ.get("PROBE_CLAIM_MARKS"):
        _claim_marked()


def _drain_stamps(session_pk: int) -> dict:
    stamps = dict(getattr(_local, "celery", None) or {})
    _local.celery = None
    stamps["drain"] = time.time()
    popped = _popped.pop(session_pk, None)
    if popped is not None:
        stamps["popped"] = popped
    _by_session[session_pk] = stamps  # _start runs on the loop's database thread
    return stamps


def _drain_done(stamps: dict, cpu: float) -> None:
    stamps["end"] = time.time()
    stamps["drain_cpu"] = (time.thread_time() - cpu) * 1000
    stamps["pid"] = os.getpid()
    _client.rpush("probe:done", json.dumps(stamps))


def _patch_drainers() -> None:
    """agents_app.wake_drainers: "popped" when the drainer's pop returns, "drain" when its drain starts."""
    from agents_app import wake_drainers

    pop, woken = wake_drainers.Drainers._pop, wake_drainers._drain_woken

    async def probed_pop(self):
        got = await pop(self)
        if got is not None:
            _popped[got[1]] = time.time()
        return got

    async def probed_woken(session_pk):
        stamps = _drain_stamps(session_pk)
        cpu = time.thread_time()
        try:
            return await woken(session_pk)
        finally:
            _drain_done(stamps, cpu)

    wake_drainers.Drainers._pop = probed_pop
    wake_drainers._drain_woken = probed_woken


def _claim_marked() -> None:
    """queue_probe.py --claim-marks: the claim's statement from the loop sent with three SELECTs of the
    database's clock put in (before its lock statement, after it, after the claim), read with its row;
    statement_timestamp() says when the database started the query string."""
    from agents_app import session_async, turn_sql

    try:  # the loop's connections keep what they prepared there (main after 1926938)
        from agents_app import loop_prepared as prepared
    except ImportError:  # an older tree: turn_sql kept it
        prepared = None
    arun = turn_sql._arun

    async def marked(sql, params):
        if sql != turn_sql._START:
            return await arun(sql, params)
        stamps = _by_session.get(params["pk"], {})
        statement = turn_sql._prepared(sql)
        clock = "extract(epoch from clock_timestamp())"
        marks = f"SELECT extract(epoch from statement_timestamp()), {clock}"
        if turn_sql._HEAD_END in statement.execute:  # SET; SELECT ... FOR NO KEY UPDATE; SET; EXECUTE (older)
            head, rest = statement.execute.split(turn_sql._HEAD_END, 1)
            first, lock = head.split("; ", 1)  # the commit mode, the lock statement
            marked_sql = f"{first}; {marks}; {lock}{turn_sql._HEAD_END}SELECT {clock}; {rest}; SELECT {clock}"
        else:  # EXECUTE lock(pk); EXECUTE claim(...) (main after e6ed83b)
            lock, rest = statement.execute.split("; ", 1)
            marked_sql = f"{marks}; {lock}; SELECT {clock}; {rest}; SELECT {clock}"

        async def run(conn):
            async with conn.cursor() as cursor:
                ready = (prepared or turn_sql)._ready.setdefault(conn, set())
                for needed in (*getattr(statement, "before", ()), statement):  # as the claim would prepare them
                    if needed.name not in ready:
                        await cursor.execute(needed.prepare)
                        ready.add(needed.name)
                stamps["claim_sent"] = time.time()
                await cursor.execute(marked_sql, params)
                stamps["claim_reply"] = time.time()
                rows = []
                while True:
                    if cursor.description is not None:
                        rows.append(await cursor.fetchone())
                    if not cursor.nextset():
                        return rows

        rows = await session_async.on_connection(run, again_if_lost=False)
        (received, before_lock), _, (locked,), claimed, (done,) = rows
        stamps.update(db_received=float(received), db_lock=float(before_lock), db_locked=float(locked))
        stamps["db_done"] = float(done)
        return claimed

    turn_sql._arun = marked
