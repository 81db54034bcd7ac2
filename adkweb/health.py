"""Probes for load balancers and orchestrators, answered before host checks and HTTPS redirects (a
probe addressed by IP over plain HTTP still gets an answer) and without authentication:

- `/healthz`: the process is up and serving (touches nothing else: a database outage must not get
  every web process restarted).
- `/readyz`: the database, the broker and the channel layer answer within a few seconds each:
  200 `{"status": "ready", ...}`, or 503 `{"status": "unavailable", "down": ["broker", ...]}` naming
  what is down. Checks run concurrently, each bounded by ADKWEB_READYZ_TIMEOUT; the reasons shown
  are exception class names only (hosts and credentials stay in the log)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlparse

from asgiref.sync import async_to_sync, iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings
from django.db import connections
from django.http import HttpRequest, HttpResponse, JsonResponse

logger = logging.getLogger(__name__)

PATHS = ("/healthz", "/readyz")


def _database() -> None:
    conn = connections["default"]
    try:
        with conn.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    finally:
        conn.close()  # this thread's connection (back to the pool, if pooled)


def _broker() -> None:
    url = settings.CELERY_BROKER_URL
    timeout = settings.ADKWEB_READYZ_TIMEOUT
    if url.startswith("memory://"):  # the embedded demo: in this process
        return
    if urlparse(url).scheme in ("redis", "rediss"):
        import redis

        client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
        try:
            client.ping()
        finally:
            client.close()
        return
    from kombu import Connection

    with Connection(url, connect_timeout=timeout) as conn:
        conn.ensure_connection(max_retries=1)


async def _channel_layer() -> None:
    """A message to a new channel of this process's layer and back."""
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    if layer is None:
        raise RuntimeError("no channel layer configured")
    channel = await layer.new_channel()
    await layer.send(channel, {"type": "readyz.ping"})
    message = await layer.receive(channel)
    if message.get("type") != "readyz.ping":
        raise RuntimeError("the channel layer returned another message")


CHECKS: dict[str, Callable[[], Awaitable[None]]] = {
    "database": sync_to_async(_database, thread_sensitive=False),
    "broker": sync_to_async(_broker, thread_sensitive=False),
    "channel_layer": _channel_layer,
}


async def _check(name: str, check: Callable[[], Awaitable[None]]) -> str:
    try:
        await asyncio.wait_for(check(), timeout=settings.ADKWEB_READYZ_TIMEOUT)
    except TimeoutError:
        logger.warning("readyz: %s did not answer within %s s", name, settings.ADKWEB_READYZ_TIMEOUT)
        return f"down: no answer within {settings.ADKWEB_READYZ_TIMEOUT:g} s"
    except Exception as exc:
        logger.warning("readyz: %s is down", name, exc_info=True)
        return f"down: {type(exc).__name__}"
    return "ok"


async def readiness() -> tuple[int, dict[str, Any]]:
    names = list(CHECKS)
    results = await asyncio.gather(*(_check(name, CHECKS[name]) for name in names))
    checks = dict(zip(names, results, strict=True))
    down = [name for name, result in checks.items() if result != "ok"]
    body = {"status": "unavailable" if down else "ready", "down": down, "checks": checks}
    return (503 if down else 200), body


async def _answer(request: HttpRequest) -> HttpResponse:
    if request.method not in ("GET", "HEAD"):
        return JsonResponse({"detail": "Method not allowed: use GET."}, status=405, headers={"Allow": "GET, HEAD"})
    if request.path == "/healthz":
        status, body = 200, {"status": "ok"}
    else:
        status, body = await readiness()
    return JsonResponse(body, status=status, headers={"Cache-Control": "no-store"})


class ProbeMiddleware:
    """First in MIDDLEWARE: answers the probe paths itself; every other request goes on untouched."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self._acall(request)
        if request.path in PATHS:
            return async_to_sync(_answer)(request)
        return self.get_response(request)

    async def _acall(self, request: HttpRequest) -> HttpResponse:
        if request.path in PATHS:
            return await _answer(request)
        return await self.get_response(request)
