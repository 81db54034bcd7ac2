"""Embedded mode's broker (adkweb.memory_broker). The kombu-level tests show a waiting consumer
takes a message when it is published, and a consumer at its prefetch limit when it acks, not at its
next poll: with the poll set to a minute, kombu's own memory transport waits out the 30 s drain
timeout in both (checked). The Celery test shows a real worker runs on this transport, in order; it
would pass on kombu's transport too, since Celery's loop drains with a 2 s timeout of its own."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from celery import Celery
from celery.contrib.testing.worker import start_worker

from tests.conftest import wait_for

QUEUE = "adkweb-broker-test"
# kombu's own memory transport ("memory") fails both kombu-level tests below: it waits out its poll.
TRANSPORT = "adkweb.memory_broker:Transport"  # the memory broker is process-wide: a queue no other worker consumes


@pytest.fixture
def app_and_done():
    app = Celery("adkweb-broker-test", set_as_current=False)
    app.conf.update(
        broker_url="memory://",
        broker_transport=TRANSPORT,
        broker_transport_options={"polling_interval": 60},
        task_default_queue=QUEUE,
        task_acks_late=True,
        worker_prefetch_multiplier=1,
        task_ignore_result=True,
        worker_hijack_root_logger=False,
    )
    done: list[int] = []
    release = threading.Event()

    @app.task(name=f"broker_test.record.{uuid.uuid4().hex}")  # a fresh task per test
    def record(n: int, hold: bool = False) -> None:
        if hold:
            release.wait(30)
        done.append(n)

    return app, record, done, release


def test_the_transport_is_the_embedded_one(settings):
    from kombu import Connection

    from adkweb.celery import app
    from adkweb.memory_broker import Transport

    if settings.CELERY_BROKER_URL != "memory://":
        pytest.skip("services mode: the broker is Redis")
    with app.connection_for_write() as conn:
        assert isinstance(conn.transport, Transport)
    assert Connection("memory://").transport_cls == "memory"  # plain memory:// is kombu's, untouched


def test_an_idle_worker_takes_each_message_when_it_is_published(app_and_done):
    app, record, done, _ = app_and_done
    with start_worker(app, pool="threads", concurrency=1, perform_ping_check=False, loglevel="WARNING"):
        time.sleep(0.5)  # the worker is idle, waiting
        for n in range(3):
            started = time.monotonic()
            record.delay(n)
            wait_for(lambda n=n: n in done, timeout=10, what=f"message {n} (the poll is 60 s)")
            assert time.monotonic() - started < 10
    assert done == [0, 1, 2]


def _consumer(conn, queue: str, got: list, *, prefetch: int | None = None):
    from kombu import Consumer, Queue

    channel = conn.channel()
    if prefetch:
        channel.basic_qos(0, prefetch, False)
    consumer = Consumer(channel, [Queue(queue)], callbacks=[lambda body, message: got.append((body, message))])
    consumer.consume()
    return consumer


def _drain_in_thread(conn, timeout: float) -> tuple[threading.Thread, list[float]]:
    took: list[float] = []

    def drain() -> None:
        started = time.monotonic()
        conn.drain_events(timeout=timeout)
        took.append(time.monotonic() - started)

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    return thread, took


def test_a_waiting_consumer_gets_a_message_when_it_is_published_not_at_its_next_poll():
    from kombu import Connection

    queue = f"adkweb-broker-test-{uuid.uuid4().hex}"
    got: list = []
    with Connection("memory://", transport=TRANSPORT, transport_options={"polling_interval": 60}) as conn:
        _consumer(conn, queue, got)
        thread, took = _drain_in_thread(conn, timeout=30)
        time.sleep(0.5)  # the consumer has looked, found nothing and waits
        with Connection("memory://", transport=TRANSPORT) as producer:
            producer.SimpleQueue(queue).put({"n": 1})
        thread.join(35)
    assert [body for body, _ in got] == [{"n": 1}]
    assert took and took[0] < 10, took  # a 30 s wait (the poll, capped by the timeout) without the wake-up


def test_a_consumer_at_its_prefetch_limit_takes_the_next_message_when_it_acks():
    from kombu import Connection

    queue = f"adkweb-broker-test-{uuid.uuid4().hex}"
    got: list = []
    with Connection("memory://", transport=TRANSPORT, transport_options={"polling_interval": 60}) as conn:
        _consumer(conn, queue, got, prefetch=1)
        with Connection("memory://", transport=TRANSPORT) as producer:
            producer.SimpleQueue(queue).put({"n": 1})
            producer.SimpleQueue(queue).put({"n": 2})
        conn.drain_events(timeout=5)
        assert [body for body, _ in got] == [{"n": 1}]  # unacked: the consumer is at its limit
        thread, took = _drain_in_thread(conn, timeout=30)
        time.sleep(0.5)
        got[0][1].ack()  # a worker thread finished its task
        thread.join(35)
    assert [body for body, _ in got] == [{"n": 1}, {"n": 2}]
    assert took and took[0] < 10, took


@pytest.fixture
def background(monkeypatch):
    """A fresh queue made a background one (the broker is process-wide: no other worker consumes it)."""
    from adkweb import memory_broker

    queue = f"adkweb-broker-test-bg-{uuid.uuid4().hex}"
    monkeypatch.setattr(memory_broker, "BACKGROUND", frozenset({queue}))
    return queue


def _put(queue: str, body: dict) -> None:
    from kombu import Connection

    with Connection("memory://", transport=TRANSPORT) as producer:
        producer.SimpleQueue(queue).put(body)


def test_a_background_queue_waits_for_the_process_to_be_free(background, monkeypatch):
    from kombu import Connection

    from adkweb import memory_broker

    monkeypatch.setattr(memory_broker, "QUIET", 0.3)
    foreground = f"adkweb-broker-test-{uuid.uuid4().hex}"
    got: list = []
    with Connection("memory://", transport=TRANSPORT, transport_options={"polling_interval": 60}) as conn:
        _consumer(conn, background, got)
        _consumer(conn, foreground, got)
        with memory_broker.foreground():  # a turn runs
            _put(background, {"n": "email"})
            _put(foreground, {"n": "turn"})
            conn.drain_events(timeout=5)
            with pytest.raises(TimeoutError):
                conn.drain_events(timeout=0.5)
            assert [body for body, _ in got] == [{"n": "turn"}]  # the other queue's message went at once
            ended = time.monotonic()
        conn.drain_events(timeout=30)
        took = time.monotonic() - ended
    assert [body for body, _ in got] == [{"n": "turn"}, {"n": "email"}]
    assert 0.25 <= took < 10, took  # QUIET after the work ended, not at the next 60 s poll


def test_a_held_message_goes_after_MOST_however_busy_the_process_is(background, monkeypatch):
    from kombu import Connection

    from adkweb import memory_broker

    monkeypatch.setattr(memory_broker, "QUIET", 60.0)
    monkeypatch.setattr(memory_broker, "MOST", 0.5)
    got: list = []
    with Connection("memory://", transport=TRANSPORT, transport_options={"polling_interval": 60}) as conn:
        _consumer(conn, background, got)
        with memory_broker.foreground():
            started = time.monotonic()
            _put(background, {"n": 1})
            _put(background, {"n": 2})
            conn.drain_events(timeout=30)
            conn.drain_events(timeout=30)  # everything held then goes, not one a MOST
            took = time.monotonic() - started
    assert [body for body, _ in got] == [{"n": 1}, {"n": 2}]
    assert 0.4 <= took < 10, took


def test_a_background_message_goes_at_once_when_nothing_runs(background):
    from kombu import Connection

    got: list = []
    with Connection("memory://", transport=TRANSPORT, transport_options={"polling_interval": 60}) as conn:
        _consumer(conn, background, got)
        time.sleep(0.1)  # past QUIET since any foreground work of other tests
        started = time.monotonic()
        _put(background, {"n": 1})
        conn.drain_events(timeout=30)
        took = time.monotonic() - started
    assert [body for body, _ in got] == [{"n": 1}]
    assert took < 0.2, took


def test_a_connection_to_the_memory_broker_warns_of_no_missing_hostname(caplog):
    """`make run`'s log: kombu warned "No hostname was supplied. Reverting to default 'localhost'" for each
    connection to memory:// (the in-process worker's, the sweeper's): a memory broker has no host."""
    from kombu import Connection

    from adkweb.memory_broker import Transport

    with caplog.at_level("WARNING", logger="kombu.connection"):
        with Connection("memory://", transport=Transport) as conn:
            info = conn.info()
    assert info["hostname"] is None
    assert [r.getMessage() for r in caplog.records if r.name == "kombu.connection"] == []


def test_hold_left_is_the_rule_of_the_queues_and_of_the_quiet_thread(monkeypatch):
    """memory_broker.hold_left(since): held while foreground work runs and QUIET after, at most MOST
    after `since`; it keeps no state (adkweb.quiet_work's waiting work is not a queue in _held_since)."""
    from adkweb import memory_broker

    monkeypatch.setattr(memory_broker, "QUIET", 60.0)
    monkeypatch.setattr(memory_broker, "MOST", 30.0)
    held = dict(memory_broker._held_since)
    with memory_broker.foreground():
        now = time.monotonic()
        assert 29 < memory_broker.hold_left(now) <= 30  # MOST from now: sooner than QUIET
        assert memory_broker.hold_left(now - 31) == 0.0  # past MOST: it goes, however busy
        monkeypatch.setattr(memory_broker, "MOST", 120.0)
        assert 59 < memory_broker.hold_left(now) <= 60  # QUIET, while the work runs
    assert 59 < memory_broker.hold_left(time.monotonic()) <= 60  # QUIET after it ended
    monkeypatch.setattr(memory_broker, "QUIET", 0.0)
    assert memory_broker.hold_left(time.monotonic()) == 0.0  # quiet now: it goes
    assert memory_broker._held_since == held
