"""Django's own middleware, with their hooks run on the event loop under ASGI.

Django runs a `MiddlewareMixin` middleware's `process_request` / `process_view` / `process_response`
in a thread (one `sync_to_async` hop each) when the request is served async, as daphne serves every
request: fourteen hops per request with this project's MIDDLEWARE, each a thread hand-over, a future
and a wake-up of the loop, for hooks that read a header or set one. Most of those hooks do no I/O;
the classes below run them directly on the loop, and keep the hop for the cases that can touch the
database (a session to save, messages to store, a CSRF secret kept in the session, a form body to
parse for its CSRF token). Served sync (the test client, WSGI) they are Django's, unchanged.

Should a hook do I/O here all the same, Django's `async_unsafe` guard refuses the database call in the
loop's thread (`SynchronousOnlyOperation`): a loud failure, not a blocked loop.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import iscoroutinefunction, sync_to_async
from django.conf import settings
from django.contrib.auth import middleware as auth
from django.contrib.messages import middleware as messages
from django.contrib.sessions import middleware as sessions
from django.http import HttpRequest, HttpResponseBase
from django.middleware import clickjacking, common, csrf, security

SAFE_METHODS = ("GET", "HEAD", "OPTIONS", "TRACE")  # csrf's: never checked, so no body read


class OnTheLoop:
    """For a `MiddlewareMixin` whose hooks do no I/O except where `request_blocks`, `view_blocks` or
    `response_blocks` say so: under ASGI they run on the loop, the others in a thread as Django does."""

    get_response: Any
    async_mode: bool

    def __init__(self, get_response: Any) -> None:
        super().__init__(get_response)  # type: ignore[call-arg]
        self._sync_process_view = getattr(self, "process_view", None)
        if self.async_mode and self._sync_process_view is not None:
            # The handler awaits an async process_view as it is, and hops for a sync one.
            setattr(self, "process_view", self._process_view_on_the_loop)  # noqa: B010

    def request_blocks(self, request: HttpRequest) -> bool:
        return False

    def view_blocks(self, request: HttpRequest, callback: Any) -> bool:
        return False

    def response_blocks(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        return False

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        response = None
        process_request = getattr(self, "process_request", None)
        if process_request is not None:
            if self.request_blocks(request):
                response = await sync_to_async(process_request, thread_sensitive=True)(request)
            else:
                response = process_request(request)
        response = response or await self.get_response(request)
        process_response = getattr(self, "process_response", None)
        if process_response is not None:
            if self.response_blocks(request, response):
                response = await sync_to_async(process_response, thread_sensitive=True)(request, response)
            else:
                response = process_response(request, response)
        return response

    async def _process_view_on_the_loop(
        self, request: HttpRequest, callback: Any, args: tuple, kwargs: dict
    ) -> HttpResponseBase | None:
        process_view = self._sync_process_view  # the class's sync hook
        assert process_view is not None
        if self.view_blocks(request, callback):
            return await sync_to_async(process_view, thread_sensitive=True)(request, callback, args, kwargs)
        return process_view(request, callback, args, kwargs)


class SecurityMiddleware(OnTheLoop, security.SecurityMiddleware):
    """Headers and the HTTPS redirect: settings and the request's own fields only."""


class SessionMiddleware(OnTheLoop, sessions.SessionMiddleware):
    """The session is read lazily (by whoever uses it, in a thread); saving it is a write."""

    def response_blocks(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        session = getattr(request, "session", None)
        return session is not None and (session.modified or settings.SESSION_SAVE_EVERY_REQUEST)


class CommonMiddleware(OnTheLoop, common.CommonMiddleware):
    """Host and user-agent checks, the slash redirect (a URL resolve), Content-Length."""


# A checked request's form body small enough to parse for its token on the loop (bytes).
FORM_ON_THE_LOOP_MAX = 64 * 1024


class CsrfViewMiddleware(OnTheLoop, csrf.CsrfViewMiddleware):
    """The secret comes from the cookie (or the session, CSRF_USE_SESSIONS: a read, so a thread). A
    checked request has its body parsed for the token (`request.POST`): a multipart body may write
    its files to disk (a thread); a url-encoded one is parsed from memory (ASGIRequest reads the whole
    body first, kept in memory up to FILE_UPLOAD_MAX_MEMORY_SIZE), on the loop when it is small (every
    form and htmx action of the pages); any other body is not read at all."""

    def request_blocks(self, request: HttpRequest) -> bool:
        return settings.CSRF_USE_SESSIONS

    def view_blocks(self, request: HttpRequest, callback: Any) -> bool:
        if settings.CSRF_USE_SESSIONS:
            return True
        if getattr(callback, "csrf_exempt", False) or request.method in SAFE_METHODS:
            return False
        if request.content_type == "multipart/form-data":
            return True
        if request.content_type != "application/x-www-form-urlencoded":
            return False  # request.POST is empty for it: the body is not read
        try:
            length = int(request.META["CONTENT_LENGTH"])  # none (chunked): its size is not known here
        except (KeyError, ValueError):
            return True
        return not 0 <= length <= min(FORM_ON_THE_LOOP_MAX, settings.FILE_UPLOAD_MAX_MEMORY_SIZE)

    def response_blocks(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        return settings.CSRF_USE_SESSIONS


class AuthenticationMiddleware(OnTheLoop, auth.AuthenticationMiddleware):
    """`request.user` is lazy: the session and the user are read by whoever asks, in a thread."""


class MessageMiddleware(OnTheLoop, messages.MessageMiddleware):
    """Messages are stored (cookie, else session) only when some were read or added."""

    def response_blocks(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        storage = getattr(request, "_messages", None)
        return storage is not None and (storage.used or storage.added_new)


class XFrameOptionsMiddleware(OnTheLoop, clickjacking.XFrameOptionsMiddleware):
    """One header."""


def runs_on_the_loop(middleware: Any) -> bool:
    """Whether an instance's hooks run on the loop (for tests)."""
    return isinstance(middleware, OnTheLoop) and iscoroutinefunction(middleware)
