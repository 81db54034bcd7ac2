"""/metrics: Prometheus text for a scraper with the bearer token or a staff login (nobody else), with
turns by status and duration, the queue's oldest turn, open tickets and the oldest's age, decisions
by outcome, and this process's open websockets."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from adkweb import metrics
from agents_app import services
from agents_app.models import Turn
from approvals.models import PendingCall, Response
from tests.approvals_factories import session_for, ticket


@pytest.fixture(autouse=True)
def _fresh():
    metrics.SOURCES_COLLECTOR.clear()
    yield
    metrics.SOURCES_COLLECTOR.clear()


def samples(client: Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    r = client.get("/metrics")
    assert r.status_code == 200, r.content
    assert r["Content-Type"].startswith("text/plain; version=")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(r.content.decode())
        for s in family.samples
    }


def staff() -> Client:
    client = Client()
    client.force_login(User.objects.get_or_create(username="ops", defaults={"is_staff": True})[0])
    return client


def test_only_the_token_or_staff_may_read_them(db, settings):
    anonymous = Client().get("/metrics")
    assert anonymous.status_code == 401 and anonymous["WWW-Authenticate"].startswith("Bearer")
    assert b"ADKWEB_METRICS_TOKEN" in anonymous.content
    person = Client()
    person.force_login(User.objects.create_user("pat", password="pw-pat-1"))
    assert person.get("/metrics").status_code == 403
    assert staff().get("/metrics").status_code == 200
    assert Client(HTTP_AUTHORIZATION="Bearer anything").get("/metrics").status_code == 401  # no token set: none
    settings.ADKWEB_METRICS_TOKEN = "s3cret-scrape-token"
    assert Client(HTTP_AUTHORIZATION="Bearer s3cret-scrape-token").get("/metrics").status_code == 200
    assert Client(HTTP_AUTHORIZATION="Bearer s3cret-scrape-tokeN").get("/metrics").status_code == 401
    assert Client(HTTP_AUTHORIZATION="Token s3cret-scrape-token").get("/metrics").status_code == 401
    assert staff_post(settings).status_code == 405


def staff_post(settings) -> object:
    return Client(HTTP_AUTHORIZATION=f"Bearer {settings.ADKWEB_METRICS_TOKEN}").post("/metrics")


def test_turns_by_status_and_duration_and_the_oldest_queued(demo):
    session = session_for("requester", "stock_agent")
    now = timezone.now()

    def turn(status: str, took: float | None = None, waited: float = 0.0) -> Turn:
        row = Turn.objects.create(session=session, kind="message", content={}, status=status)
        fields: dict = {"created_at": now - timedelta(seconds=waited)}
        if took is not None:
            fields.update(started_at=now - timedelta(seconds=took), finished_at=now)
        Turn.objects.filter(pk=row.pk).update(**fields)
        return row

    turn("done", 0.3), turn("done", 4), turn("done", 45), turn("failed", 700)
    turn("running"), turn("queued", waited=90), turn("queued", waited=5)
    old = turn("done", 1)  # finished before the durations' window (ADKWEB_METRICS_TURN_WINDOW_SECONDS)
    Turn.objects.filter(pk=old.pk).update(finished_at=now - timedelta(hours=2))
    got = samples(staff())
    assert got[("adkweb_turns", (("status", "queued"),))] == 2
    assert got[("adkweb_turns", (("status", "running"),))] == 1
    assert got[("adkweb_turns", (("status", "done"),))] == 4
    assert got[("adkweb_turns", (("status", "failed"),))] == 1
    done = {
        dict(labels)["le"]: value
        for (name, labels), value in got.items()
        if name == "adkweb_turn_duration_seconds_bucket" and ("status", "done") in labels
    }
    assert (done["0.5"], done["2.5"], done["5.0"], done["30.0"], done["60.0"], done["+Inf"]) == (1, 1, 2, 2, 3, 3)
    assert got[("adkweb_turn_duration_seconds_count", (("status", "done"),))] == 3
    assert got[("adkweb_turn_duration_seconds_sum", (("status", "done"),))] == pytest.approx(49.3, abs=0.01)
    assert got[("adkweb_turn_duration_seconds_bucket", (("le", "600.0"), ("status", "failed")))] == 0
    assert got[("adkweb_turn_queue_oldest_age_seconds", ())] == pytest.approx(90, abs=5)
    assert got[("adkweb_metrics_source_up", (("source", "turns"),))] == 1


def test_open_tickets_the_oldest_and_decisions_by_outcome(demo):
    old, new, closed = ticket(), ticket(), ticket()
    PendingCall.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(hours=2))
    closed.status = PendingCall.Status.APPROVED
    closed.save(update_fields=["status"])  # a save: the session's stored status follows
    for action, source in (("approve", "person"), ("approve", "person"), ("reject", "policy"), ("update", "person")):
        Response.objects.create(pending_call=closed, action=action, source=source, payload={}, final=False)
    got = samples(staff())
    assert got[("adkweb_tickets_open", ())] == 2
    assert got[("adkweb_tickets", (("status", "pending"),))] == 2
    assert got[("adkweb_tickets", (("status", "approved"),))] == 1
    assert got[("adkweb_ticket_oldest_open_age_seconds", ())] == pytest.approx(7200, abs=10)
    assert got[("adkweb_decisions_total", (("by", "person"), ("outcome", "approve")))] == 2
    assert got[("adkweb_decisions_total", (("by", "policy"), ("outcome", "reject")))] == 1
    assert got[("adkweb_decisions_total", (("by", "person"), ("outcome", "update")))] == 1
    assert new.pk


def test_nothing_open_reads_zero_and_a_failing_source_is_reported_not_fatal(db, monkeypatch):
    got = samples(staff())
    assert got[("adkweb_tickets_open", ())] == 0 and got[("adkweb_ticket_oldest_open_age_seconds", ())] == 0
    assert got[("adkweb_turn_queue_oldest_age_seconds", ())] == 0

    def broken():
        raise RuntimeError("database down")

    monkeypatch.setitem(metrics.SOURCES, "tickets", broken)
    metrics.SOURCES_COLLECTOR.clear()
    got = samples(staff())
    assert got[("adkweb_metrics_source_up", (("source", "tickets"),))] == 0
    assert ("adkweb_tickets_open", ()) not in got and got[("adkweb_turns", (("status", "queued"),))] == 0


def test_reads_are_cached_between_scrapes(demo, settings, django_assert_max_num_queries):
    settings.ADKWEB_METRICS_CACHE_SECONDS = 60
    client = staff()
    samples(client)
    services.session_create(app_name="stock_agent", user_id="ops")
    with django_assert_max_num_queries(2):  # the session and user of the staff login, nothing else
        samples(client)


@pytest.mark.django_db(transaction=True)
async def test_websocket_connections_of_this_process(demo):
    from channels.routing import URLRouter
    from channels.testing import WebsocketCommunicator

    from adkweb.asgi import router
    from adkweb.routing import websocket_urlpatterns

    assert router.application_mapping["websocket"].__qualname__.startswith("websocket_counter")
    app = metrics.websocket_counter(URLRouter(websocket_urlpatterns))
    before = metrics.WEBSOCKETS._value.get()
    sockets = []
    for _ in range(2):
        comm = WebsocketCommunicator(app, "/ws/approvals/")
        comm.scope["user"] = demo["approver"]
        assert (await comm.connect())[0]
        sockets.append(comm)
    refused = WebsocketCommunicator(app, "/ws/approvals/")
    from django.contrib.auth.models import AnonymousUser

    refused.scope["user"] = AnonymousUser()
    assert not (await refused.connect())[0]  # never accepted: not counted
    assert metrics.WEBSOCKETS._value.get() == before + 2
    for comm in sockets:
        await comm.disconnect()
    assert metrics.WEBSOCKETS._value.get() == before
