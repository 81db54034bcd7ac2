"""A connection of Django's pool that its server ended while it sat idle there (a restart of PostgreSQL,
an operator's pg_terminate_backend, idle_session_timeout) is found so when it is taken and replaced
(adkweb.postgresql.base.idle_ended): the next request is answered. Its first statement used to fail,
a 500, once for each connection the pool kept."""

from __future__ import annotations

import time

import pytest
from django.db import connection

from agents_app.models import AdkSession
from tests.integration.test_session_store_loop import _terminate

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_connections", "demo")]


def _pooled_idle(n: int) -> list[int]:
    """`n` connections of this process's pool, idle in it: their server processes."""
    connection.close()  # this thread's, back to the pool
    pool = connection.pool
    assert pool is not None, "the integration tests run on Django's psycopg pool (settings: DATABASE_POOL)"
    taken = [pool.getconn() for _ in range(n)]
    pids = [conn.info.backend_pid for conn in taken]
    for conn in taken:
        pool.putconn(conn)
    return pids


def test_after_the_server_ended_the_pools_idle_connections_the_next_requests_are_answered(client, demo):
    client.force_login(demo["approver"])
    assert client.get("/").status_code == 200
    pids = _pooled_idle(3)
    assert _terminate(pids) == 3
    time.sleep(0.1)  # their FATAL messages and their ends reach this side
    for _ in range(3):  # each would have been handed a connection the server ended
        response = client.get("/")
        assert response.status_code == 200
        connection.close()
    assert AdkSession.objects.count() == 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] not in pids
