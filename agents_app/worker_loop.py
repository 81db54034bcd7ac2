"""A long-lived event loop per worker thread, for the turns that thread runs.

`asyncio.run` per turn paid, every turn, for a new event loop, a new thread for the turn's
database work (and a PostgreSQL connection checked out again), new Redis connections for the
channel layer (channels_redis pools them per loop) and a rebuilt agent (a model's HTTP client may
be bound to the loop that first used it, so nothing could be cached across loops). Here each
thread that runs turns keeps, for its lifetime:

- one event loop (`run()` runs a coroutine on it to completion, as `asyncio.run` did);
- one thread for the loop's thread-sensitive database work (`sync_to_async`), the same for every
  turn of the loop, and for every `async_to_sync` made there (they come back to this loop);
- per-loop state (`loop_state()`): agents_app.run_cache keeps its runners there, so nothing built
  for one loop is ever used on another.

Created lazily in the thread that first runs a turn and keyed by process id: a prefork child never
uses a loop, thread or connection made in the parent before the fork (there is none: the worker's
main process runs no turn), nor closes one (`_inherited`), and a thread that ends takes its loop
with it (closed when collected).
Each thread has its own loop, so a tool that blocks its loop (a sync tool, a test gate) holds up
its own turn only, as it did with `asyncio.run`.

Nothing here keeps a process alive: the database threads are daemon threads
(`_DaemonThread`: a `ThreadPoolExecutor`'s threads are joined at interpreter exit, so one blocked
in a call held the process), and `close_all()` closes every loop of the process and stops its
threads at a Celery worker's shutdown (`connect_shutdown`, from AgentsAppConfig.ready) and in tests.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import queue
import threading
import weakref
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

from . import adk_optional

logger = logging.getLogger(__name__)
T = TypeVar("T")


class _DaemonThread(Executor):
    """An executor of one daemon thread, started at its first call: calls run one at a time, in
    order (as ThreadSensitiveContext needs). Unlike a ThreadPoolExecutor it is not joined at
    interpreter exit and keeps running what it is given until shut down."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._calls: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple, dict] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.submitted = 0  # calls given so far (agents_app.runner: did a drain use this thread?)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self._name} is shut down")
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
                self._thread.start()
            self._calls.put((future, fn, args, kwargs))
            self.submitted += 1
        return future

    def _work(self) -> None:
        while (call := self._calls.get()) is not None:
            future, fn, args, kwargs = call
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # handed to the awaiting loop, as ThreadPoolExecutor does
                future.set_exception(exc)
            del call, future, fn, args, kwargs

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
            self._calls.put(None)  # after the calls already queued
        if wait and thread is not None and thread is not threading.current_thread():
            thread.join()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


class _ThreadLoop:
    """One thread's loop, its database thread and what is cached for that loop."""

    def __init__(self) -> None:
        adk_optional.settle()  # before this loop's first run (see there: ~3 ms of every run)
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        name = threading.current_thread().name
        self.db = _DaemonThread(f"{name}-db")
        self.state: dict[str, Any] = {}
        self.turns = 0
        weakref.finalize(self, _close_in, self.pid, self.loop, self.db)
        with _every_lock:
            _every.add(self)


def _close_in(pid: int, loop: asyncio.AbstractEventLoop, db: Executor) -> None:
    if pid == os.getpid():  # never a parent's loop in a forked child: see _forked
        _close(loop, db)


def _close(loop: asyncio.AbstractEventLoop, *pools: Executor) -> None:
    for pool in pools:
        pool.shutdown(wait=False)
    if loop.is_running() or loop.is_closed():
        return
    if asyncio._get_running_loop() is None:
        loop.close()
    else:
        # A finalizer the garbage collector ran on a thread that runs a loop of its own (another drain
        # thread, a test's): the close runs the closing loop (channels_redis flushes its pools, our
        # wires close), which Python refuses there, and the loop and its connections were left open.
        threading.Thread(target=loop.close, name="worker-loop-close", daemon=True).start()


_local = threading.local()
# Every loop of this process (weakly: a thread that ends takes its loop with it), for close_all().
_every: weakref.WeakSet[_ThreadLoop] = weakref.WeakSet()
_every_lock = threading.Lock()
# In a forked child, the parent's loops, kept for the child's lifetime and never closed there: a
# loop's selector (epoll) is shared with the parent across the fork, and closing the loop in the
# child unregisters its wake-up socket from it, so the parent's loop then slept through every
# result its database thread handed back (a parent's turn hung after a child had run one).
_inherited: list[_ThreadLoop] = []


def _forked() -> None:
    global _every_lock
    _every_lock = threading.Lock()  # another thread may have held it at the fork
    _inherited.extend(_every)
    _every.clear()


os.register_at_fork(after_in_child=_forked)
# The loop whose coroutine is running in this context: also seen by the database thread's calls
# (sync_to_async copies the context), which belong to that loop.
_running: contextvars.ContextVar[_ThreadLoop | None] = contextvars.ContextVar("adkweb_worker_loop", default=None)


def _current() -> _ThreadLoop:
    held: _ThreadLoop | None = getattr(_local, "held", None)
    if held is None or held.pid != os.getpid() or held.loop.is_closed():
        held = _local.held = _ThreadLoop()
    return held


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` on this thread's long-lived loop and return its result. Tasks it leaves behind
    are cancelled (as `asyncio.run` does), so nothing of one turn runs during the next."""
    held = _current()
    loop = held.loop
    asyncio.set_event_loop(loop)
    token = _running.set(held)
    try:
        return loop.run_until_complete(coro)
    finally:
        _running.reset(token)
        held.turns += 1
        _cancel_leftovers(loop)
        asyncio.set_event_loop(None)


async def run_here(coro: Coroutine[Any, Any, T], then: Callable[[], None] | None = None) -> T:
    """Run `coro` as `run()` would, from a coroutine that runs its whole life on this thread's loop
    (agents_app.wake_drainers): a task of its own in a copy of the context, counted as one of the
    loop's runs, the tasks it leaves behind cancelled at its end (all but the caller's), so nothing of
    one turn runs during the next. `then` is called once the task has run its first step."""
    held = _owner()
    loop = asyncio.get_running_loop()
    task = loop.create_task(coro, context=contextvars.copy_context())
    if then is not None:
        loop.call_soon(then)  # after the task's first step, which call_soon'd before it
    try:
        return await task
    finally:
        held.turns += 1
        await _cancel_leftovers_here({task, asyncio.current_task()})


async def _cancel_leftovers_here(keep: set[asyncio.Task[Any] | None]) -> None:
    left = [t for t in asyncio.all_tasks() if t not in keep and not t.done()]
    for task in left:
        task.cancel()
    if left:
        await asyncio.wait(left)
    _log_failed(left)


def _owner() -> _ThreadLoop:
    """The loop running in this context (also from its database thread), else this thread's."""
    held = _running.get()
    return held if held is not None and held.pid == os.getpid() else _current()


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    left = [t for t in asyncio.all_tasks(loop) if not t.done()]
    if not left:
        return
    for task in left:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
    _log_failed(left)


def _log_failed(left: list[asyncio.Task[Any]]) -> None:
    for task in left:
        if not task.cancelled() and task.exception() is not None:
            logger.warning("A task left by a turn failed: %r", task.exception())


def close_all(**_signal: Any) -> int:
    """Close every loop of this process and stop its threads (a Celery worker's shutdown; tests).
    A loop still running a turn is left to its thread (its threads are daemons: they do not hold
    the process); a thread that runs a turn again later makes a new loop. Returns how many closed."""
    with _every_lock:
        held = [h for h in _every if h.pid == os.getpid()]
        _every.clear()
    closed = 0
    for h in held:
        if h.loop.is_running():
            continue
        _close(h.loop, h.db)
        closed += 1
    if held:
        logger.info("Worker loops closed: %d of %d (the others were running a turn).", closed, len(held))
    return closed


def connect_shutdown() -> None:
    """At a Celery worker's shutdown (its main process; a prefork child's too), close every loop."""
    from celery.signals import worker_process_shutdown, worker_shutdown

    worker_shutdown.connect(close_all, weak=False, dispatch_uid="adkweb-worker-loop-close")
    worker_process_shutdown.connect(close_all, weak=False, dispatch_uid="adkweb-worker-loop-close-child")


def loop_threads() -> list[threading.Thread]:
    """The live database threads of this process's loops (tests)."""
    with _every_lock:
        held = list(_every)
    return [t for h in held if (t := h.db._thread) is not None and t.is_alive()]


def db_executor() -> Executor:
    """The one thread that runs this loop's thread-sensitive database calls (for ThreadSensitiveContext)."""
    return _owner().db


def db_calls() -> int:
    """How many calls this loop's database thread has been given (agents_app.runner: a drain whose
    statements all went from the loop has no connection of that thread's to give back)."""
    return _owner().db.submitted


def loop_state() -> dict[str, Any]:
    """A dict that lives as long as the loop running in this context (for objects bound to it)."""
    return _owner().state


def loop_turns() -> int:
    """How many coroutines this thread's loop has run (tests: one loop survives many turns)."""
    return _owner().turns


def loop_id() -> int:
    return id(_owner().loop)
