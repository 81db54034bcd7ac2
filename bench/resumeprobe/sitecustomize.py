"""Bench only: where a click to resume spends its time, for bench/fanout.py (`--probe`). Not app code:
bench/fanout.py puts this folder first on the servers' PYTHONPATH, so Python imports it at startup,
whichever source tree the server runs (this one or `--tree`; a name a tree lacks is skipped).

BENCH_PROBE_LOG=<file>: once Django is set up, some functions of the web process and of the worker
are wrapped to write `<tag> <wall clock> <pid> <thread>` lines when they start (`tag<`) and end
(`tag>`); fanout.py reads the lines of each sample's window (POST sent .. frame received)."""

import functools
import inspect
import os
import sys
import threading
import time

_path = os.environ.get("BENCH_PROBE_LOG")


def _mark(tag: str) -> None:
    _out.write(f"{tag} {time.time():.6f} {os.getpid()} {threading.get_ident()}\n")


def _wrap(owner: object, name: str, tag: str, detail=None) -> None:  # noqa: ANN001
    fn = getattr(owner, name, None)
    if fn is None:
        sys.stderr.write(f"bench probe: {owner}.{name} not found, not probed\n")
        return
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def wrapped(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            _mark(tag + (detail(*args, **kwargs) if detail else "") + "<")
            try:
                return await fn(*args, **kwargs)
            finally:
                _mark(tag + ">")

    else:

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            _mark(tag + (detail(*args, **kwargs) if detail else "") + "<")
            try:
                return fn(*args, **kwargs)
            finally:
                _mark(tag + ">")

    setattr(owner, name, wrapped)


def _types(*args, **kwargs) -> str:  # noqa: ANN002, ANN003
    pairs = args[1] if len(args) > 1 else kwargs.get("pairs", [])
    return ":" + ",".join(sorted({str(m.get("type")) for _g, m in pairs})) if pairs else ":ask"


# (module, class in it or "", function, tag): wrapped as they are, where the tree has the module.
_PLAIN = [
    ("adkweb.wsframes", "FrameWriter", "write", "frame"),
    ("approvals.services", "", "ticket_approve", "approve"),
    ("approvals.views", "", "_ticket_reply", "reply"),
    ("approvals.views", "", "_acted_on", "acted_on"),
    ("adkweb.handler", "ASGIHandler", "__call__", "asgi"),
    # the request's way to its view (ASGI handler: body, request_started, middleware, the thread hop)
    ("django.core.handlers.asgi", "ASGIHandler", "read_body", "read_body"),
    ("django.dispatch.dispatcher", "Signal", "asend", "signal"),
    ("django.core.handlers.base", "BaseHandler", "get_response_async", "get_response"),
    ("django.core.handlers.base", "BaseHandler", "_get_response_async", "resolve_view"),
    ("django.contrib.sessions.backends.db", "SessionStore", "load", "session_load"),
    ("django.contrib.auth", "", "get_user", "get_user"),
    ("approvals.decisions", "", "answers_submit", "decision"),
    ("approvals.ticket_locks", "", "session_and_ticket_locked", "locks"),
    ("approvals.decisions", "", "_session_and_ticket_locked", "locks"),  # before the split
    ("agents_app.services", "", "turn_add", "turn_add"),
    ("approvals.decision_write", "", "record", "record"),
    ("approvals.decisions", "", "_record", "record"),  # before the split
    ("approvals.chain", "", "link", "chain"),
    ("agents_app.enqueue|agents_app.services", "", "session_enqueue", "wake"),  # services before the split
    ("agents_app.fanout", "", "publish_event", "publish_event"),
    ("agents_app.selectors", "", "session_event_view", "event_view"),
    ("agents_app.runner", "", "_start", "claim"),
    ("agents_app.runner", "", "_astart", "claim"),  # the claim sent from the worker loop (phase 13 (worker))
    ("agents_app.runner", "", "session_turns_run", "drain"),
    ("agents_app.events", "", "anotify_session_status", "status"),
    ("agents_app.session_service", "DjangoSessionService", "append_event", "append"),
    ("agents_app.session_service", "DjangoSessionService", "_store_event", "store"),
    ("agents_app.session_service", "", "anotify_session_event", "notify_event"),
    ("agents_app.turn_exec", "", "turn_run", "turn_run"),
    # /run (bench/http_flow.py --probe)
    ("agents_app.api.run", "", "_prepare", "run.prepare"),
    ("agents_app.api.run", "", "_queue", "run.queue"),
    ("agents_app.api.watch", "TurnWatch", "start", "watch.start"),
    ("agents_app.api.watch", "TurnWatch", "stop", "watch.stop"),
    ("agents_app.api.watch", "", "_progress", "watch.read"),
    ("approvals.services", "", "message_submit", "message_submit"),
    ("agents_app.runner", "", "_done_next", "done_next"),
    ("agents_app.events", "", "anotify_turn_done", "turn_done"),
    # /run's answer on its way out (bench/http_flow.py --probe): Django's send, daphne's write, Twisted's
    ("django.core.handlers.asgi", "ASGIHandler", "send_response", "send_response"),
    ("daphne.http_protocol", "WebRequest", "handle_reply", "daphne_reply"),
    ("twisted.internet.abstract", "FileDescriptor", "doWrite", "tx_write"),
    ("agents_app.api.watch", "", "follow", "follow"),
]


def _install() -> None:
    from importlib import import_module

    def mod(name: str):  # noqa: ANN202
        try:
            return import_module(name)
        except Exception:  # noqa: BLE001
            return None

    live = mod("adkweb.live")
    if live is not None:
        _wrap(live, "_agroup_send_many", "redis", _types)
        _wrap(live, "_send_many", "redis_sync", lambda pairs: _types(None, pairs))
    layer = mod("adkweb.channel_layers.redis_layer")
    if layer is not None:
        _wrap(
            layer.RedisChannelLayer,
            "_hand_out",
            "handout",
            lambda self, channel, message: ":" + str(message.get("type")),
        )
    for modules, owner, name, tag in _PLAIN:
        # "a|b": the first of those modules that has it (an older tree kept it elsewhere)
        found = next((m for m in map(mod, modules.split("|")) if m is not None and hasattr(m, owner or name)), None)
        if found is not None:
            _wrap(getattr(found, owner) if owner else found, name, tag)
    afan = mod("approvals.fanout")
    if afan is not None:
        for name in dir(afan):
            if name.startswith("publish") and callable(getattr(afan, name)):
                _wrap(afan, name, f"appr.{name}")
    ww = mod("agents_app.wake_worker")
    if ww is not None and hasattr(ww, "WakeListener"):
        _wrap(ww.WakeListener, "_hand_over", "pop")
    else:
        for name in dir(ww or object()):
            cls = getattr(ww, name)
            if isinstance(cls, type) and hasattr(cls, "_hand_over"):
                _wrap(cls, "_hand_over", "pop")
    drainers = mod("agents_app.wake_drainers")  # the drainers pop and drain on one loop: the drain's start
    if drainers is not None and hasattr(drainers, "_drain_woken"):
        _wrap(drainers, "_drain_woken", "pop")
    from django.db.backends.base.base import BaseDatabaseWrapper

    _wrap(BaseDatabaseWrapper, "commit", "commit")
    if os.environ.get("BENCH_PROBE_SQL"):  # every statement: `sql:<its first words>` (a census, not a timing)
        from django.db.backends.utils import CursorWrapper

        def words(self, sql, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
            return ":" + "_".join(str(sql).split()[:6]).replace('"', "")[:60]

        _wrap(CursorWrapper, "_execute", "sql", words)
    sys.stderr.write(f"bench probe: logging to {_path}\n")


if os.environ.get("BENCH_SWITCH_INTERVAL") and "daphne" in sys.argv[0]:  # an experiment: the web's GIL switch interval
    sys.setswitchinterval(float(os.environ["BENCH_SWITCH_INTERVAL"]))

if _path:
    _out = open(_path, "a", buffering=1)  # noqa: SIM115 - for the life of the process
    import django

    _setup = django.setup

    def setup(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        _setup(*args, **kwargs)
        try:
            _install()
        except Exception as exc:  # noqa: BLE001
            sys.stderr.write(f"bench probe: not installed ({exc!r})\n")

    django.setup = setup
