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

import asyncio
import contextvars
import functools
import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers import base
from django.core.handlers.asgi import ASGIHandler as DjangoASGIHandler
from django.core.handlers.asgi import ASGIRequest, get_script_prefix
from django.http import HttpResponseBase
from django.urls import set_script_prefix
from django.utils.module_loading import import_string

from . import memory_broker, middleware, storable

logger = logging.getLogger(__name__)
MAX_IDLE = 32  # idle request threads kept; past that a finished request's thread ends


class RequestThread(ThreadPoolExecutor):
    """One request's thread (max_workers=1), which knows whether work of its request is still on it
    (a request cancelled while its sync code runs leaves it running: that thread is not reused)."""

    def __init__(self) -> None:
        super().__init__(max_workers=1, thread_name_prefix="request")
        self._pending = 0
        self._count_lock = threading.Lock()
        self._first: Callable[[], object] | None = None

    def first(self, fn: Callable[[], object]) -> None:
        """Run `fn` on this thread before the next work submitted, in the same hand-over (no hop of its own)."""
        self._first = fn

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future:
        first, self._first = self._first, None
        if first is not None:
            fn = functools.partial(_after, first, fn)
        with self._count_lock:
            self._pending += 1
        try:
            future = super().submit(fn, *args, **kwargs)
        except BaseException:
            self._done(None)
            raise
        future.add_done_callback(self._done)
        return future

    def submit_last(self, fn: Callable[..., object], /, *args: Any) -> Future:
        """`fn(*args)` as the request's last work on this thread, not waited for and not counted as
        work still on it (`idle`): the next request given this thread runs after it (one worker, in order)."""
        first, self._first = self._first, None
        if first is not None:
            fn = functools.partial(_after, first, fn)
        return super().submit(fn, *args)

    def _done(self, _future: Future | None) -> None:
        with self._count_lock:
            self._pending -= 1

    @property
    def idle(self) -> bool:
        return self._pending == 0


def _after(first: Callable[[], object], fn: Any, /, *args: Any, **kwargs: Any) -> Any:
    first()
    return fn(*args, **kwargs)


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

    def create_request(
        self, scope: Mapping[str, Any], body_file: IO[bytes]
    ) -> tuple[ASGIRequest, None] | tuple[None, HttpResponseBase]:
        """Django's, with a message where it refuses a query string whose bytes are not UTF-8 (its only
        UnicodeDecodeError: the path and headers come as text): its bare 400 had an empty body. Worded as
        the URLs StorableUrlMiddleware refuses (which never see this request: no middleware runs)."""
        made = super().create_request(scope, body_file)
        if made[1] is not None and made[1].status_code == 400:
            detail = "The URL's query string is not UTF-8 text: percent-encode its UTF-8 bytes (%C3%A9 for é)."
            return None, storable.url_refused(scope.get("path", ""), detail)
        return made

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        thread = self._idle.pop() if self._idle else RequestThread()
        self._thread.set(thread)
        try:
            with memory_broker.foreground():
                async with ThreadSensitiveContext(executor=thread):
                    await self.handle(scope, receive, send)
        finally:
            if thread.idle and len(self._idle) < MAX_IDLE:
                self._idle.append(thread)
            else:
                thread.shutdown(wait=False)  # its last work (if any) finishes, then the thread ends

    _thread: contextvars.ContextVar[RequestThread] = contextvars.ContextVar("adkweb_request_thread")

    async def handle(self, scope: dict, receive: Any, send: Any) -> None:
        """Django's `ASGIHandler.handle` (5.2), but for request_started: Django sends it with a hop of its
        own to the request's thread (its receivers, `close_old_connections` and `reset_queries`, look at
        that thread's connections), ~0.3 ms quiet and over 1 ms at load before every request's view.
        Here its receivers run on that thread first thing in the request's first hand-over there (a
        middleware hook's, the view's, or at the latest the response's close), before any of the
        request's sync code, so also before any database call. The rest is Django's, line for line."""
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        sender, thread = self.__class__, self._thread.get(None)
        if thread is None or signals.request_started._live_receivers(sender)[1]:  # an async receiver: Django's
            await signals.request_started.asend(sender=sender, scope=scope)
        else:
            thread.first(functools.partial(signals.request_started.send, sender=sender, scope=scope))
        request, error_response = self.create_request(scope, body_file)
        if request is None:
            assert error_response is not None  # Django's create_request gives one or the other
            body_file.close()
            await self.send_response(error_response, send)
            await sync_to_async(error_response.close)()
            return

        async def process_request(request: Any, send: Any) -> Any:
            response = await self.run_get_response(request)
            try:
                await self.send_response(response, send)
            except asyncio.CancelledError:
                pass  # client disconnected during send_response
            return response

        tasks = [
            asyncio.create_task(self.listen_for_disconnect(receive)),
            asyncio.create_task(process_request(request, send)),
        ]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            if task.done():
                try:
                    task.result()
                except RequestAborted:
                    pass  # client disconnects
                except AssertionError:
                    body_file.close()
                    raise
            else:
                task.cancel()  # allow views to handle cancellation
                try:
                    await task
                except asyncio.CancelledError:
                    pass
        try:
            response = tasks[1].result()
        except asyncio.CancelledError:
            await signals.request_finished.asend(sender=self.__class__)
        else:
            thread = self._thread.get(None)
            if thread is None:
                await sync_to_async(response.close)()
            else:  # see _closed: not waited for
                thread.submit_last(contextvars.copy_context().run, _closed, response)
        body_file.close()


def _closed(response: HttpResponseBase) -> None:
    """A response's close (its closers, then Django's request_finished: the thread's database
    connections, agents_app.wake.left_read), on its request's thread after the answer was sent, as
    Django runs it, but not waited for: the loop's hop back (~0.12 ms of CPU, a wake-up of the loop)
    saved on every request. Nothing of the request runs after it; the next request on this thread
    runs behind it, so its request_started still follows this request_finished. An error is logged,
    as the server logged one raised by Django's close."""
    try:
        response.close()
    except Exception:
        logger.exception("Closing the response of a request failed")


def daphne_bodies_unparsed() -> None:
    """Under daphne, a request is Twisted's, which by default parses a POST's URL-encoded or multipart
    body into `request.args` before daphne hands the body, as read, to ASGI: its Content-Type through
    the email package (~0.1 ms of the event loop a POST: every `/run`), a multipart upload parsed whole
    a first time. Daphne never reads `args` (Django parses the body itself): turned off for every
    request of the process. A no-op without daphne; once per process."""
    try:
        from daphne.http_protocol import WebRequest
    except ImportError:  # pragma: no cover (daphne is a dependency; another server needs nothing)
        return
    if getattr(WebRequest, "_adkweb_bodies_unparsed", False):
        return
    init = WebRequest.__init__

    @functools.wraps(init)
    def unparsed(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **{**kwargs, "parsePOSTFormSubmission": False})

    WebRequest.__init__ = unparsed
    WebRequest._adkweb_bodies_unparsed = True
