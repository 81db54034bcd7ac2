"""/healthz (the process is up: touches nothing) and /readyz (database, broker and channel layer;
503 naming what is down), answered before host checks and HTTPS redirects, without authentication.
A Redis on a closed port stands for a Redis that is down."""

from __future__ import annotations

import socket

import pytest
from django.test import Client


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once this closes


def test_healthz_answers_without_touching_the_database(db, django_assert_num_queries):
    client = Client()
    with django_assert_num_queries(0):
        r = client.get("/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok"} and r["Cache-Control"] == "no-store"
    assert client.head("/healthz").status_code == 200
    assert client.post("/healthz").status_code == 405


def test_probes_answer_any_host_and_plain_http(db, settings):
    """A load balancer probes by IP over HTTP: no DisallowedHost 400, no redirect to HTTPS."""
    settings.ALLOWED_HOSTS = ["adkweb.example.com"]
    settings.SECURE_SSL_REDIRECT = True
    client = Client(HTTP_HOST="10.1.2.3:8000")
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200
    assert client.get("/accounts/login/").status_code == 400  # everything else still checks the host


def test_readyz_is_ready_when_everything_answers(db):
    r = Client().get("/readyz")
    assert r.status_code == 200, r.content
    assert r.json() == {
        "status": "ready",
        "down": [],
        "checks": {"database": "ok", "broker": "ok", "channel_layer": "ok"},
    }


@pytest.mark.django_db(transaction=True)
def test_readyz_names_the_broker_and_channel_layer_when_redis_is_down(settings):
    port = _closed_port()
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{port}/0"
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": f"redis://127.0.0.1:{port}/0", "socket_timeout": 2}]},
        }
    }
    r = Client().get("/readyz")
    assert r.status_code == 503, r.content
    body = r.json()
    assert body["status"] == "unavailable" and body["down"] == ["broker", "channel_layer"]
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["broker"].startswith("down: ") and body["checks"]["channel_layer"].startswith("down: ")
    assert str(port) not in r.content.decode()  # addresses stay in the log


def test_readyz_says_a_check_that_hangs_is_down(db, settings, monkeypatch):
    import asyncio

    from adkweb import health

    async def hangs() -> None:
        await asyncio.sleep(30)

    settings.ADKWEB_READYZ_TIMEOUT = 0.2
    monkeypatch.setitem(health.CHECKS, "database", hangs)
    r = Client().get("/readyz")
    assert r.status_code == 503 and r.json()["down"] == ["database"]
    assert r.json()["checks"]["database"] == "down: no answer within 0.2 s"
