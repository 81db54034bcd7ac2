"""Django's ASGI handler, with each request's thread kept for the next request.

Django runs a request's sync code (its ORM calls, sync views and middleware hooks) on one thread of
its own, so that they share the thread's database connection: `ThreadSensitiveContext()` around
each request, which starts a new thread for it and, at its end, another thread to join that one.
Two threads started and stopped per request. Here the request's thread comes from a list of idle
single-thread executors and goes back to it afterwards, as a WSGI server's worker threads serve
request after request: the same one-thread-per-request rule (no two requests' sync code share a
thread at once), without the starts. Each request still begins and ends with Django's
request_started / request_finished on its thread, which close the thread's database connections
(back into the pool) as before.

A request is work someone waits for: while it runs, embedded mode's background queues hold their
messages (adkweb.memory_broker.foreground).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from asgiref.sync import ThreadSensitiveContext
from django.core.handlers import base
from django.core.handlers.asgi import ASGIHandler as DjangoASGIHandler
from django.utils.module_loading import import_string

from . import memory_broker, middleware

MAX_IDLE = 32  # idle request threads kept; past that a finished request's thread ends


class RequestThread(ThreadPoolExecutor):
    """One request's thread (max_workers=1), which knows whether work of its request is still on it
    (a request cancelled while its sync code runs leaves it running: that thread is not reused)."""

    def __init__(self) -> None:
        super().__init__(max_workers=1, thread_name_prefix="request")
        self._pending = 0
        self._count_lock = threading.Lock()

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future:
        with self._count_lock:
            self._pending += 1
        try:
            future = super().submit(fn, *args, **kwargs)
        except BaseException:
            self._done(None)
            raise
        future.add_done_callback(self._done)
        return future

    def _done(self, _future: Future | None) -> None:
        with self._count_lock:
            self._pending -= 1

    @property
    def idle(self) -> bool:
        return self._pending == 0


# Django's middleware (settings.MIDDLEWARE names them) and adkweb.middleware's versions, whose hooks
# run on the event loop where they do no I/O.
ON_THE_LOOP = {
    "django.middleware.security.SecurityMiddleware": middleware.SecurityMiddleware,
    "django.contrib.sessions.middleware.SessionMiddleware": middleware.SessionMiddleware,
    "django.middleware.common.CommonMiddleware": middleware.CommonMiddleware,
    "django.middleware.csrf.CsrfViewMiddleware": middleware.CsrfViewMiddleware,
    "django.contrib.auth.middleware.AuthenticationMiddleware": middleware.AuthenticationMiddleware,
    "django.contrib.messages.middleware.MessageMiddleware": middleware.MessageMiddleware,
    "django.middleware.clickjacking.XFrameOptionsMiddleware": middleware.XFrameOptionsMiddleware,
}


def _import_middleware(path: str) -> Any:
    return ON_THE_LOOP.get(path) or import_string(path)


class MiddlewareOnTheLoop:
    """A handler that loads ON_THE_LOOP's versions of Django's middleware (settings keep Django's names:
    `check --deploy` looks for them there)."""

    def load_middleware(self, is_async: bool = False) -> None:
        loading = getattr(base, "import_string")  # noqa: B009
        setattr(base, "import_string", _import_middleware)  # noqa: B010  (BaseHandler.load_middleware's)
        try:
            super().load_middleware(is_async)  # type: ignore[misc]
        finally:
            setattr(base, "import_string", loading)  # noqa: B010


class ASGIHandler(MiddlewareOnTheLoop, DjangoASGIHandler):
    def __init__(self) -> None:
        super().__init__()
        self._idle: list[RequestThread] = []

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        thread = self._idle.pop() if self._idle else RequestThread()
        try:
            with memory_broker.foreground():
                async with ThreadSensitiveContext(executor=thread):
                    await self.handle(scope, receive, send)
        finally:
            if thread.idle and len(self._idle) < MAX_IDLE:
                self._idle.append(thread)
            else:
                thread.shutdown(wait=False)  # its last work (if any) finishes, then the thread ends
