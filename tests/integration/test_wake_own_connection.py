"""A wake-up's push on its thread's own Redis connection (agents_app.wake.Unread, `_thread_connection`):
not checked out of the client's pool each time (its poll of the socket and its counters, ~0.1-0.17 ms
after an idle gap on the wake-up's way: bench/README.md, phase 26 (queue)), packed by hand; what a push
owes is read before the thread's next one. A connection Redis closed meanwhile still delivers the next
wake-up, once. Redis only (a list of the test's own: no worker listens on it)."""

from __future__ import annotations

import socket
from typing import Any

import pytest
import redis
from django.test import override_settings

from agents_app import enqueue, wake


@pytest.fixture
def wake_list(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(wake, "key", lambda app=None: wake.KEY_PREFIX + "test-own-connection")
    r = wake.client()
    r.delete(wake.key())
    yield lambda: [int(v) for v in r.lrange(wake.key(), 0, -1)]
    r.delete(wake.key())


def test_pushes_go_on_the_threads_own_connection_not_the_pools(wake_list, monkeypatch):
    pool = wake.client().connection_pool
    checkouts: list[Any] = []
    get = pool.get_connection

    def counted(*args: Any, **kwargs: Any) -> Any:
        checkouts.append(1)
        return get(*args, **kwargs)

    monkeypatch.setattr(pool, "get_connection", counted)
    for pks in ([1, 2], [3]):
        with wake.replies_later() as unread:
            for pk in pks:
                wake.wake(pk)
        unread.read()
    assert checkouts == []  # (the list read below is the pool's)
    assert wake_list() == [1, 2, 3]
    packer = pool.connection_class(**pool.connection_kwargs)  # not connected: it only packs
    packed = packer.pack_commands([("RPUSH", "k", 12), ("LTRIM", "k", -wake.KEEP, -1)])
    assert wake._packed("k", 12) == b"".join(packed)  # as redis-py packs them


def test_a_rolled_back_push_is_read_before_the_threads_next(wake_list):
    with wake.replies_later():
        wake.wake(1)  # its transaction rolled back: its replies never read by a commit hook
    with wake.replies_later() as unread:
        wake.wake(2)
    unread.read()  # the first push's replies first (by the second push), then its own
    assert wake_list() == [1, 2]
    wake.wake(3)  # the plain path after it
    assert wake_list() == [1, 2, 3]


@override_settings(ADKWEB_WAKE_LIST=True)
def test_a_connection_redis_closed_still_delivers_the_next_wake_up_once(wake_list):
    at = enqueue._AtCommit(1)
    at.push()
    at.done()
    own = wake._thread_connection()
    own.send_command("CLIENT", "ID")
    wake.client().client_kill_filter(_id=own.read_response())
    for pk in (2, 3):  # as a message's wake-up goes: pushed as its COMMIT leaves, its reply read after
        at = enqueue._AtCommit(pk)
        at.push()
        at.done()
    assert wake_list() == [1, 2, 3]


def test_a_push_to_an_unreachable_redis_tries_to_connect_once(monkeypatch):
    """Only a connection that was open may be stale (Redis closed it): its send failing is sent once more on
    a new connection. A connection that could not be made is not tried again: where Redis does not answer,
    each attempt waits its connect timeout (2 s), on a decision's way with its session row locked
    (agents_app.enqueue.session_enqueue_before_commit) and on the web's thread; the pool's checkout before
    1670f95 tried once."""
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    down = redis.Redis.from_url(f"redis://127.0.0.1:{port}/0", socket_timeout=5, socket_connect_timeout=2)
    attempts: list[int] = []
    connect = down.connection_pool.connection_class._connect

    def counted(self: Any) -> Any:
        attempts.append(1)
        return connect(self)

    monkeypatch.setattr(down.connection_pool.connection_class, "_connect", counted)
    before = wake._clients.swap(down)
    try:
        with pytest.raises(redis.exceptions.ConnectionError), wake.replies_later():
            wake.wake(1)
    finally:
        wake._clients.swap(before)
    assert len(attempts) == 1  # (red before: 2)


@override_settings(ADKWEB_WAKE_LIST=True)
def test_a_refused_push_read_by_the_next_push_at_its_commit_is_sent_again_after_it(wake_list, monkeypatch, caplog):
    """Two wake-ups pushed as one COMMIT leaves (two turns' on_commit_sent steps run together, then their
    `done`s): the second push reads what the first owes first. Before (`_left_read` there), a refusal of the
    first was logged as a rolled-back transaction's and dropped: its `done` found nothing owed, and its turn
    waited for the sweeper. Now (`Unread.collect`) the refusal is kept for its owner, which sends it again
    after the commit."""
    r = wake.client()
    refused = wake.KEY_PREFIX + "test-own-connection-a-string"
    r.set(refused, "x")  # RPUSH to it: WRONGTYPE
    names = [refused]
    real = wake.key
    monkeypatch.setattr(wake, "key", lambda app=None: names.pop() if names else real())
    first, second = enqueue._AtCommit(1), enqueue._AtCommit(2)
    try:
        first.push()
        second.push()
        first.done()
        second.done()
    finally:
        r.delete(refused)
    assert sorted(wake_list()) == [1, 2]
    assert "rolled-back" not in caplog.text
