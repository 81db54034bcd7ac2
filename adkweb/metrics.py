"""Prometheus metrics at `/metrics` (prometheus_client's text format).

Who may read them: a scraper sending `Authorization: Bearer <ADKWEB_METRICS_TOKEN>` (when that is
set), or a logged-in staff member; anyone else gets 401 (403 when logged in without staff status).

What they are:
- from the database, so the same from whichever web process answers, and counting the work of every
  worker: each app registers a *source* here (`register_source`, in its AppConfig.ready), a function
  returning metric families (turns by status and their durations, the queue of owed turns, open
  tickets and the age of the oldest, decisions by outcome). They are read at most every
  ADKWEB_METRICS_CACHE_SECONDS, so many scrapers cost the database one read.
- from the broker: messages waiting in each Celery queue (Redis broker).
- from this process: open websocket connections (`websocket_counter` wraps the websocket
  application in adkweb.asgi), and prometheus_client's process metrics. Scrape every web process
  for these (each reports its own).

A source that fails (the database is down) is skipped and reported by `adkweb_metrics_source_up 0`."""

from __future__ import annotations

import hmac
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlparse

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Gauge, ProcessCollector, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

logger = logging.getLogger(__name__)

Source = Callable[[], Iterable[Metric]]
SOURCES: dict[str, Source] = {}

REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)
WEBSOCKETS = Gauge("adkweb_websocket_connections", "Open websocket connections of this web process.", registry=REGISTRY)


def register_source(name: str, source: Source) -> None:
    """A function returning metric families, read at scrape time (apps call this in ready())."""
    SOURCES[name] = source


def broker_queue_lengths() -> Iterable[Metric]:
    """Messages waiting in each Celery queue (Redis: one list per queue, named after it)."""
    url = settings.CELERY_BROKER_URL
    if urlparse(url).scheme not in ("redis", "rediss"):
        return []
    import redis

    family = GaugeMetricFamily(
        "adkweb_broker_queue_messages", "Messages waiting in the broker, by Celery queue.", labels=["queue"]
    )
    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    try:
        for queue in settings.CELERY_TASK_QUEUES:
            family.add_metric([queue.name], client.llen(queue.name))
    finally:
        client.close()
    return [family]


register_source("broker", broker_queue_lengths)


class _Sources:
    """The registered sources as one collector, cached for ADKWEB_METRICS_CACHE_SECONDS."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._at = 0.0
        self._families: list[Metric] = []

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            if time.monotonic() - self._at >= settings.ADKWEB_METRICS_CACHE_SECONDS or not self._families:
                self._families = self._read()
                self._at = time.monotonic()
            return list(self._families)

    def clear(self) -> None:
        with self._lock:
            self._at, self._families = 0.0, []

    @staticmethod
    def _read() -> list[Metric]:
        families: list[Metric] = []
        up = GaugeMetricFamily(
            "adkweb_metrics_source_up", "1 if the source's metrics could be read at this scrape.", labels=["source"]
        )
        for name, source in SOURCES.items():
            try:
                families.extend(source())
                up.add_metric([name], 1)
            except Exception:
                logger.warning("metrics: source %s could not be read", name, exc_info=True)
                up.add_metric([name], 0)
        return [*families, up]


SOURCES_COLLECTOR = _Sources()
REGISTRY.register(SOURCES_COLLECTOR)


def _allowed(request: HttpRequest) -> HttpResponse | None:
    token = settings.ADKWEB_METRICS_TOKEN
    header = request.headers.get("Authorization", "")
    if token and hmac.compare_digest(header.encode(), f"Bearer {token}".encode()):
        return None
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        if user.is_staff:
            return None
        return HttpResponse("Metrics are for staff and the metrics scraper.", status=403, content_type="text/plain")
    return HttpResponse(
        "Authentication required: send 'Authorization: Bearer <ADKWEB_METRICS_TOKEN>' or log in as staff.",
        status=401,
        content_type="text/plain",
        headers={"WWW-Authenticate": 'Bearer realm="adkweb metrics"'},
    )


@require_safe
def metrics_view(request: HttpRequest) -> HttpResponse:
    refusal = _allowed(request)
    if refusal is not None:
        return refusal
    return HttpResponse(
        generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST, headers={"Cache-Control": "no-store"}
    )


def websocket_counter(app: Any) -> Any:
    """ASGI middleware: WEBSOCKETS counts the connections the application accepted and has not closed."""

    async def counted(scope: dict, receive: Callable, send: Callable) -> Any:
        accepted = False

        async def counting_send(message: dict) -> None:
            nonlocal accepted
            await send(message)
            if message.get("type") == "websocket.accept" and not accepted:
                accepted = True
                WEBSOCKETS.inc()

        try:
            return await app(scope, receive, counting_send)
        finally:
            if accepted:
                WEBSOCKETS.dec()

    return counted
