"""Operations in services mode, with real processes: /readyz of a daphne web process while its Redis
(a server of the test's own) goes down and comes back, /metrics on PostgreSQL with the broker's queue
lengths, and a celery worker's log lines carrying time, level, logger and the turn's ids."""

# ruff: noqa: F401  (metrics tests imported so that pytest collects them here again, on PostgreSQL)
from __future__ import annotations

import re
import sys
import time

import httpx
import pytest
from django.test import Client

from agents_app import services
from agents_app.models import AgentConfig, Turn
from tests.adkweb.test_metrics import (
    _fresh,
    samples,
    staff,
    test_open_tickets_the_oldest_and_decisions_by_outcome,
    test_turns_by_status_and_duration_and_the_oldest_queued,
)
from tests.conftest import wait_for

from . import processes


@pytest.fixture
def own_redis():
    redis = processes.RedisServer().start()
    yield redis
    redis.stop()


def _daphne(env: dict[str, str]) -> tuple[processes.Service, str]:
    port = processes.free_port()
    args = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "adkweb.asgi:application"]
    web = processes.Service(args, env, ready="Listening on TCP address")
    return web.start(), f"http://127.0.0.1:{port}"


@pytest.mark.django_db(transaction=True)
def test_readyz_names_what_is_down_while_redis_is_down_and_recovers(own_redis):
    web, url = _daphne(processes.service_env(own_redis.url))
    try:
        ready = httpx.get(f"{url}/readyz", timeout=10)
        assert ready.status_code == 200, ready.text
        assert ready.json()["checks"] == {"database": "ok", "broker": "ok", "channel_layer": "ok"}

        own_redis.stop()
        started = time.monotonic()
        down = httpx.get(f"{url}/readyz", timeout=10)
        assert down.status_code == 503 and time.monotonic() - started < 8  # bounded, not hanging
        assert down.json()["status"] == "unavailable" and down.json()["down"] == ["broker", "channel_layer"]
        assert down.json()["checks"]["database"] == "ok"
        assert httpx.get(f"{url}/healthz", timeout=10).status_code == 200  # the process itself is fine

        own_redis.start()  # the same port again
        wait_for(lambda: httpx.get(f"{url}/readyz", timeout=10).status_code == 200, timeout=20, what="ready again")
    finally:
        web.stop()


def test_readyz_names_the_database_when_postgresql_is_unreachable(own_redis):
    closed = processes.free_port()
    env = {**processes.service_env(own_redis.url), "DATABASE_URL": f"postgres://postgres@127.0.0.1:{closed}/adkweb"}
    web, url = _daphne(env)
    try:
        r = httpx.get(f"{url}/readyz", timeout=15)
        assert r.status_code == 503 and r.json()["down"] == ["database"], r.text
    finally:
        web.stop()


@pytest.mark.django_db(transaction=True)
def test_readyz_in_this_process_with_every_service_up():
    from channels.layers import channel_layers

    shared = channel_layers.backends.pop("default", None)  # a layer of this test's own event loop
    try:
        r = Client().get("/readyz")
    finally:
        channel_layers.backends.pop("default", None)
        if shared is not None:
            channel_layers.backends["default"] = shared
    assert r.status_code == 200 and r.json()["status"] == "ready", r.content


def test_metrics_report_the_brokers_queue_lengths(db, settings, own_redis):
    import redis

    settings.CELERY_BROKER_URL = own_redis.url
    client = redis.Redis.from_url(own_redis.url)
    client.lpush("agents", "m1", "m2", "m3")
    client.lpush("notifications", "n1")
    got = samples(staff())
    assert got[("adkweb_broker_queue_messages", (("queue", "agents"),))] == 3
    assert got[("adkweb_broker_queue_messages", (("queue", "notifications"),))] == 1
    assert got[("adkweb_metrics_source_up", (("source", "broker"),))] == 1
    own_redis.stop()
    from adkweb import metrics

    metrics.SOURCES_COLLECTOR.clear()
    got = samples(staff())  # Redis down: that source is reported down, the rest still served
    assert got[("adkweb_metrics_source_up", (("source", "broker"),))] == 0
    assert got[("adkweb_metrics_source_up", (("source", "turns"),))] == 1


LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARNING|ERROR) [\w.]+( \[[^\]]+\])?: ")


@pytest.mark.django_db(transaction=True)
def test_worker_log_lines_have_time_level_logger_and_the_turns_ids(demo, monkeypatch, own_redis):
    env = processes.service_env(own_redis.url)
    producer = processes.producer(own_redis.url)
    monkeypatch.setattr(
        "agents_app.enqueue.session_enqueue", lambda *, session_pk: processes.send_drain(producer, session_pk)
    )
    worker = processes.worker(env, concurrency=2).start()
    try:
        session = services.session_create(app_name="stock_agent", user_id="requester")
        AgentConfig.objects.filter(name="stock_agent").update(enabled=False)  # the turn fails: a warning is logged
        turn = services.message_send(session=session, text="hi", actor=demo["requester"])
        wait_for(lambda: Turn.objects.get(pk=turn.pk).status == Turn.Status.FAILED, timeout=30, what="the turn to fail")
        wait_for(lambda: f"Turn {turn.pk} failed" in worker.text(), timeout=10, what="the warning in the log")
        text = worker.text()
    finally:
        worker.stop()
    failed = next(line for line in text.splitlines() if f"Turn {turn.pk} failed" in line)
    assert LINE.match(failed), failed
    assert f" WARNING agents_app.runner [turn={turn.pk} session={session.pk}]: Turn {turn.pk} failed" in failed
    ready = next(line for line in text.splitlines() if line.endswith(" ready."))
    assert LINE.match(ready), ready  # Celery's own lines take the same format
