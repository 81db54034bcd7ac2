"""Requests served async (as daphne serves them): Django's middleware with their hooks on the event
loop (adkweb.middleware) and the request threads kept between requests (adkweb.handler). What must
not change: sessions saved, messages kept across a redirect, CSRF enforced, security headers; each
request's sync code on one thread of its own, never shared with a request running at the same time."""

from __future__ import annotations

import asyncio
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from asgiref.sync import SyncToAsync, sync_to_async
from django.core.signals import request_finished, request_started
from django.test import AsyncClient as DjangoAsyncClient
from django.test.client import AsyncClientHandler

from adkweb import middleware
from adkweb.handler import ASGIHandler, MiddlewareOnTheLoop, RequestThread
from agents_app.tokens import token_create

pytestmark = pytest.mark.django_db(transaction=True)


class _Handler(MiddlewareOnTheLoop, AsyncClientHandler):
    """The test client's async handler, with the middleware daphne's handler loads."""


def AsyncClient(**kwargs: Any) -> DjangoAsyncClient:  # noqa: N802
    client = DjangoAsyncClient(**kwargs)
    client.handler = _Handler(enforce_csrf_checks=kwargs.get("enforce_csrf_checks", False))
    return client


def _csrf(html: str) -> str:
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)


async def _login(client: AsyncClient, username: str) -> None:
    page = await client.get("/accounts/login/")
    token = _csrf(page.content.decode())
    done = await client.post(
        "/accounts/login/", {"username": username, "password": f"{username}-demo", "csrfmiddlewaretoken": token}
    )
    assert done.status_code == 302, done.content[:300]
    assert done.cookies["sessionid"].value  # the session was saved (its hook hopped to a thread)


async def test_login_then_pages_and_messages_across_a_redirect(demo):
    client = AsyncClient(enforce_csrf_checks=True)
    await _login(client, "requester")
    assert (await client.get("/sessions/")).status_code == 200  # logged in: the saved session was read
    # The inbox is for approvers: a message, a redirect, and the message on the next page.
    redirected = await client.get("/")
    assert redirected.status_code == 302
    page = await client.get(redirected["Location"])
    assert "The approvals inbox is for approvers" in page.content.decode()
    again = await client.get(redirected["Location"])  # shown once: the storage was updated
    assert "The approvals inbox is for approvers" not in again.content.decode()


async def test_csrf_is_enforced_for_forms_and_cookie_api_calls(demo):
    client = AsyncClient(enforce_csrf_checks=True)
    await _login(client, "requester")
    assert (await client.post("/accounts/logout/")).status_code == 403  # a form without its token
    body = {"appName": "x", "userId": "requester", "sessionId": "s"}
    refused = await client.post("/api/adk/run", body, content_type="application/json")
    assert refused.status_code == 403 and "CSRF failed" in refused.json()["detail"]
    token = client.cookies["csrftoken"].value
    allowed = await client.post("/api/adk/run", body, content_type="application/json", headers={"X-CSRFToken": token})
    assert allowed.status_code == 404  # past CSRF and auth: the app does not exist
    logout = await client.post("/accounts/logout/", {"csrfmiddlewaretoken": token})
    assert logout.status_code == 302


async def test_security_headers_and_token_auth(demo):
    _, key = await sync_to_async(token_create)(user=demo["requester"])
    client = AsyncClient()
    health = await client.get("/api/adk/health")
    assert health["X-Frame-Options"] == "DENY" and health["X-Content-Type-Options"] == "nosniff"
    assert health["Referrer-Policy"] == "same-origin"
    assert (await client.get("/api/adk/list-apps")).status_code == 401
    listed = await client.get("/api/adk/list-apps", headers={"Authorization": f"Token {key}"})
    assert listed.status_code == 200 and "Cookie" not in listed.get("Vary", "")  # no session touched


async def test_hooks_run_on_the_loop_unless_they_write(demo, monkeypatch):
    """Header hooks run in the loop's thread; a session save runs in a thread (no running loop there)."""
    seen: dict[str, list[bool]] = {"security": [], "session": []}

    def spy(cls: Any, name: str, key: str) -> None:
        original = getattr(cls, name)

        def hook(self: Any, *args: Any) -> Any:
            seen[key].append(asyncio._get_running_loop() is not None)
            return original(self, *args)

        monkeypatch.setattr(cls, name, hook)

    spy(middleware.SecurityMiddleware, "process_request", "security")
    spy(middleware.SessionMiddleware, "process_response", "session")
    client = AsyncClient()
    await client.get("/api/adk/health")
    assert seen == {"security": [True], "session": [True]}
    await _login(client, "requester")
    assert seen["session"][-1] is False  # the login's session save: in a thread


async def test_a_small_form_is_checked_for_its_csrf_token_on_the_loop(demo, monkeypatch):
    """A url-encoded form (the pages' forms, htmx actions) is parsed for its token in the loop's thread
    (no hop before the view's own); a multipart body, which may write files, in a thread. Enforced
    either way: no token, 403; the form's token or the header's, through."""
    seen: list[bool] = []
    original = middleware.CsrfViewMiddleware.process_view

    def hook(self: Any, *args: Any) -> Any:
        seen.append(asyncio._get_running_loop() is not None)
        return original(self, *args)

    monkeypatch.setattr(middleware.CsrfViewMiddleware, "process_view", hook)
    client = AsyncClient(enforce_csrf_checks=True)
    await _login(client, "requester")
    token = client.cookies["csrftoken"].value
    seen.clear()
    assert (await client.post("/accounts/logout/", {"other": "x"})).status_code == 403
    form = "application/x-www-form-urlencoded"
    refused = await client.post("/accounts/logout/", "other=x", content_type=form)
    assert refused.status_code == 403
    assert seen == [False, True]  # the test client's dict body is multipart: a thread; a url-encoded one: the loop
    assert (
        await client.post("/accounts/logout/", "other=x", content_type=form, headers={"X-CSRFToken": token})
    ).status_code == 302
    await _login(client, "requester")
    token = client.cookies["csrftoken"].value
    seen.clear()
    done = await client.post("/accounts/logout/", f"csrfmiddlewaretoken={token}", content_type=form)
    assert done.status_code == 302 and seen == [True]
    # Past the size parsed on the loop: a thread, and still enforced.
    big = "other=" + "x" * middleware.FORM_ON_THE_LOOP_MAX
    assert (await client.post("/accounts/logout/", big, content_type=form)).status_code == 403
    assert seen == [True, False]


def _get(path: str) -> dict[str, Any]:
    return {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(), "query_string": b"",
            "headers": [(b"host", b"testserver")], "client": ("127.0.0.1", 1), "server": ("testserver", 80),
            "scheme": "http", "root_path": "", "http_version": "1.1", "asgi": {"version": "3.0"}}  # fmt: skip


async def _serve(handler: ASGIHandler, path: str) -> int:
    sent: list[dict] = []
    received = [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive() -> dict:
        if received:
            return received.pop()
        await asyncio.sleep(3600)  # no disconnect
        return {}

    async def send(message: dict) -> None:
        sent.append(message)

    await handler(_get(path), receive, send)
    await _settled(handler)
    return sent[0]["status"]


async def _settled(handler: ASGIHandler) -> None:
    """Until what the requests left on their kept threads (their responses' close) has run."""
    for thread in list(handler._idle):
        await asyncio.wrap_future(ThreadPoolExecutor.submit(thread, lambda: None))


async def test_request_threads_are_kept_and_never_shared_by_concurrent_requests(demo):
    handler = ASGIHandler()
    threads: list[int] = []
    both_in = threading.Barrier(2, timeout=10)
    concurrent = {"on": False}

    def started(**kwargs: Any) -> None:  # Django sends request_started on the request's thread
        threads.append(threading.get_ident())
        if concurrent["on"]:
            both_in.wait()  # two requests at once: on one shared thread this would never return

    request_started.connect(started)
    try:
        assert await _serve(handler, "/api/adk/health") == 200
        assert await _serve(handler, "/api/adk/health") == 200
        assert threads[0] == threads[1]  # the first request's thread served the second
        concurrent["on"] = True
        statuses = await asyncio.gather(_serve(handler, "/api/adk/health"), _serve(handler, "/api/adk/health"))
        assert statuses == [200, 200]
        assert threads[2] != threads[3]
    finally:
        request_started.disconnect(started)


async def test_a_thread_still_busy_after_its_request_is_not_reused(demo, monkeypatch):
    """A request whose sync work outlives it (one cancelled while its sync code ran) leaves its thread
    busy: that thread is not handed to the next request, which would wait behind it."""
    handler = ASGIHandler()
    release = threading.Event()
    threads: list[int] = []

    def started(**kwargs: Any) -> None:
        threads.append(threading.get_ident())

    given: list[RequestThread] = []
    submit = RequestThread.submit

    def noted(self: RequestThread, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        given.append(self)
        return submit(self, fn, *args, **kwargs)

    def view(**kwargs: Any) -> None:  # the request's sync code (in its view's hand-over): more work for its thread
        if len(threads) == 1:
            given[-1].submit(release.wait, 10)

    monkeypatch.setattr(RequestThread, "submit", noted)

    request_started.connect(started)
    request_started.connect(view)
    try:
        assert await _serve(handler, "/api/adk/health") == 200  # a sync view: a hand-over
        assert handler._idle == []
        assert await _serve(handler, "/api/adk/health") == 200
        assert threads[1] != threads[0]
        assert len(handler._idle) == 1  # that one was idle at its end: kept
    finally:
        release.set()
        request_started.disconnect(started)
        request_started.disconnect(view)


def test_daphne_handler_loads_the_loop_versions_under_django_names(settings):
    """settings.MIDDLEWARE names Django's classes (`check --deploy` looks for them); the ASGI handler
    loads adkweb.middleware's in their place (here seen by CSRF's process_view, awaited as it is)."""
    assert "django.middleware.csrf.CsrfViewMiddleware" in settings.MIDDLEWARE
    handler = ASGIHandler()
    owners = [getattr(hook, "__self__", None) for hook in handler._view_middleware]
    assert any(isinstance(owner, middleware.CsrfViewMiddleware) for owner in owners), owners
    assert all(middleware.runs_on_the_loop(owner) for owner in owners if isinstance(owner, middleware.OnTheLoop))


async def test_request_started_runs_on_the_requests_thread_in_its_first_hand_over(demo, monkeypatch):
    """Django sends request_started with a hop of its own to the request's thread; here its receivers
    run there first thing in the request's next hand-over (before any of its sync code): one hand-over
    fewer per request. A request_started with an async receiver is sent Django's way."""
    handler = ASGIHandler()
    log: list[tuple[str, int]] = []
    submit = RequestThread.submit

    def counted(self: RequestThread, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        log.append(("hand-over", threading.get_ident()))
        return submit(self, fn, *args, **kwargs)

    def started(**kwargs: Any) -> None:
        log.append(("started", threading.get_ident()))

    def finished(**kwargs: Any) -> None:
        log.append(("finished", threading.get_ident()))

    async def also_async(**kwargs: Any) -> None:
        pass

    monkeypatch.setattr(RequestThread, "submit", counted)
    request_started.connect(started)
    request_finished.connect(finished)
    try:
        assert await _serve(handler, "/api/adk/health") == 200  # a warm-up
        log.clear()
        assert await _serve(handler, "/api/adk/health") == 200
        ours = list(log)
        log.clear()
        request_started.connect(also_async)
        try:
            assert await _serve(handler, "/api/adk/health") == 200
        finally:
            request_started.disconnect(also_async)
        djangos = list(log)
    finally:
        request_started.disconnect(started)
        request_finished.disconnect(finished)
    kinds = [kind for kind, _ in ours]
    assert kinds.count("started") == kinds.count("finished") == 1
    assert kinds.index("started") < kinds.index("finished")
    request_thread = next(t for kind, t in ours if kind == "started")
    assert all(t == request_thread for kind, t in ours if kind != "hand-over")  # on the request's thread
    assert kinds.count("hand-over") == [k for k, _ in djangos].count("hand-over") - 1, (ours, djangos)


async def test_the_response_is_closed_on_the_requests_thread_and_not_waited_for(demo, monkeypatch, caplog):
    """Django's handler waits for a hop to the request's thread to close the response (request_finished);
    here the close is handed to that thread after the answer and not waited for: no hop of the loop for it.
    It still runs on the request's thread, after the request's sync code, before the next request's; a
    close that raises is logged and the thread kept."""
    handler = ASGIHandler()
    log: list[tuple[str, int]] = []
    hops: list[str] = []
    call = SyncToAsync.__call__

    async def counted(self: SyncToAsync, *args: Any, **kwargs: Any) -> Any:
        hops.append(getattr(self.func, "__qualname__", repr(self.func)))
        return await call(self, *args, **kwargs)

    def started(**kwargs: Any) -> None:
        log.append(("started", threading.get_ident()))

    def finished(**kwargs: Any) -> None:
        log.append(("finished", threading.get_ident()))
        if len(log) == 4:
            raise RuntimeError("a receiver that fails")

    monkeypatch.setattr(SyncToAsync, "__call__", counted)
    request_started.connect(started)
    request_finished.connect(finished)
    try:
        for _ in range(3):
            assert await _serve(handler, "/api/adk/health") == 200
    finally:
        request_started.disconnect(started)
        request_finished.disconnect(finished)
    assert hops == ["health"] * 3  # the view's; Django's handler: a hop to close each response too
    assert [kind for kind, _ in log] == ["started", "finished"] * 3
    assert len({t for _, t in log}) == 1 and len(handler._idle) == 1  # one thread, kept (after the failed close too)
    assert "Closing the response of a request failed" in caplog.text
