"""Django's PostgreSQL backend, where a transaction may have work done while its COMMIT is on its way.

`on_commit_sent(sent, done)` in a transaction: once its COMMIT has been written to the server, and before
its reply is read, `sent()` runs; then `done()` runs after the commit, as a robust `on_commit` callback
(it is one: a rollback, of the transaction or of the savepoint it was registered in, drops both, as it
drops any `on_commit` callback). The commit is otherwise Django's and psycopg's: the same COMMIT, under
the connection's lock, its failure raised through Django's error mapping (`wrap_database_errors`: a
deferred constraint's violation is Django's `IntegrityError`), psycopg's transaction state read from
libpq's as after any command. `sent()`'s exceptions are logged, never raised: the COMMIT's reply is read
whatever it does. What it must not assume is the commit's outcome: the commit may still fail.

What for (bench/README.md, phase 24 (queue)): a new turn's wake-up pushed to Redis while the COMMIT
is in flight, rather than before it, so that the worker's pop, drain and claim do not take a core from
the web in the push -> COMMIT window; the claim still waits on the session row until the commit lands.

Where psycopg would not send a plain COMMIT of its own (a pipeline, a `Transaction` block, two-phase
commit) the commit is psycopg's as before and `sent()` runs after it.

Also: a connection of Django's pool that its server ended while it sat idle in the pool (a restart of
PostgreSQL, an operator's pg_terminate_backend, idle_session_timeout) is found so as it is taken
(`idle_ended`), closed and given back (the pool discards it and opens another), rather than used: its
first statement failed, a request's 500, once for each connection the pool kept, after every restart.
"""

from __future__ import annotations

import logging
import select
from collections.abc import Callable, Iterator
from typing import Any, cast

import psycopg
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.postgresql import base
from django.db.backends.utils import debug_transaction
from django.db.transaction import TransactionManagementError
from psycopg import errors, generators, pq

logger = logging.getLogger(__name__)


class _CommitSent:
    """An `on_commit` callback (`done`) with the step to run as its COMMIT leaves (`sent`)."""

    __slots__ = ("done", "sent")

    def __init__(self, sent: Callable[[], object], done: Callable[[], object]) -> None:
        self.sent, self.done = sent, done

    def __call__(self) -> None:
        self.done()


def on_commit_sent(sent: Callable[[], object], done: Callable[[], object], using: str | None = None) -> bool:
    """Run `sent()` as this transaction's COMMIT leaves, `done()` after the commit (robust). False, and
    nothing registered, where the connection's backend is not this one (e.g. SQLite). `sent()` runs with
    the connection busy (its COMMIT unread, psycopg's lock held): it must not use this connection. Outside
    a transaction `done()` runs at once, as any `on_commit` callback does there, and `sent()` never. With
    the COMMIT sent already with the transaction's statements (adkweb.postgresql.pipelined, its reply not
    read yet) `sent()` runs at once and `done()` at the atomic block's end."""
    connection = connections[using or DEFAULT_DB_ALIAS]
    if not isinstance(connection, DatabaseWrapper):
        return False
    if connection.commit_in_flight:  # sent with its statements (adkweb.postgresql.pipelined): on its way now
        _run([sent])
        connection.on_commit(done, robust=True)
        return True
    connection.on_commit(_CommitSent(sent, done), robust=True)
    return True


def _run(steps: list[Callable[[], object]]) -> None:
    for step in steps:
        try:
            step()
        except Exception:
            logger.exception("A step run as a COMMIT left failed.")


def idle_ended(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """Whether an idle connection can no longer take a statement: closed, known broken, or with something
    to read. Its server sends an idle autocommit connection of ours nothing (no LISTEN here) but its end:
    the FATAL message and the close of a backend terminated while idle. Otherwise that end is found only
    by the next statement's read, which it fails. One poll of the socket (~1 us); for the pool's
    connections (`DatabaseWrapper.get_new_connection`) and the event loops' (agents_app.loop_connections:
    the drain's claim and finish are never sent twice, so one sent there ended its drain)."""
    if conn.closed or conn.broken:
        return True
    try:
        ready = select.poll()
        ready.register(conn.pgconn.socket, select.POLLIN)
        return bool(ready.poll(0))
    except (OSError, psycopg.Error):  # no socket any more
        return True


_django_commit = cast(Any, base.DatabaseWrapper)._commit


class DatabaseWrapper(base.DatabaseWrapper):
    commit_in_flight = False  # its transaction's COMMIT sent with its statements, not yet read (pipelined)
    committed_ahead = False  # ... and done: no statement until the atomic block's end (create_cursor)

    def get_new_connection(self, conn_params: Any) -> Any:
        """Django's; from the pool, one its server ended while idle there (`idle_ended`) is closed and given
        back, and the next taken: at most the pool's size of them (after a restart, every one it kept). The
        pool's own check (CONN_HEALTH_CHECKS) would cost a round trip a checkout, and back off a second
        after the second dead one."""
        connection = super().get_new_connection(conn_params)
        pool = cast(Any, self).pool
        for _ in range(pool.max_size if pool is not None else 0):
            if not idle_ended(connection):
                break
            logger.info("A pooled connection its server ended while idle was discarded.")
            connection.close()
            pool.putconn(connection)  # closed: the pool drops it and opens another
            connection = super().get_new_connection(conn_params)
        return connection

    def create_cursor(self, name: Any = None) -> Any:
        if self.committed_ahead:  # it would run in a transaction of its own, after the commit
            raise TransactionManagementError(
                "This transaction was committed with its statements (adkweb.postgresql.pipelined): "
                "nothing may run on its connection until its atomic block ends."
            )
        return super().create_cursor(name)

    def _rollback(self) -> None:
        self.committed_ahead = False
        return cast(Any, super())._rollback()

    def _commit(self) -> None:
        self.committed_ahead = False
        hooks = cast(list[tuple[Any, Any, bool]], self.run_on_commit)  # (savepoint ids, func, robust)
        steps = [func.sent for _, func, _ in hooks if isinstance(func, _CommitSent)]
        raw: Any = self.connection
        if not steps or raw is None:
            return _django_commit(self)
        if raw._pipeline or raw._num_transactions or raw._tpc:  # psycopg's own commit (or its refusal)
            _django_commit(self)
            _run(steps)
            return None
        with debug_transaction(self, "COMMIT"), self.wrap_database_errors, raw.lock:
            raw.wait(_commit_then(raw, steps))
        return None


def _commit_then(raw: Any, steps: list[Callable[[], object]]) -> Iterator[Any]:
    """psycopg's commit (`_commit_gen`, `_exec_command(b"COMMIT")`), with `steps` run once the COMMIT
    is written and before its reply is read."""
    if raw.pgconn.transaction_status == pq.TransactionStatus.IDLE:  # nothing to commit: psycopg sends none
        _run(steps)
        return
    raw._check_connection_ok()
    raw.pgconn.send_query(b"COMMIT")
    yield from generators.send(raw.pgconn)
    _run(steps)
    results = yield from generators.fetch_many(raw.pgconn)
    if len(results) != 1:
        raise errors.InternalError(f"received {len(results)} results from command 'COMMIT'")
    result = results[0]
    if result.status != pq.ExecStatus.COMMAND_OK:
        if result.status == pq.ExecStatus.FATAL_ERROR:
            raise errors.error_from_result(result, encoding=raw.pgconn._encoding)
        raise errors.InterfaceError(f"unexpected result {pq.ExecStatus(result.status).name} from command 'COMMIT'")
