"""A whole transaction in one write: its BEGIN, its statements and its COMMIT sent together (libpq's
pipeline mode), the statements' results read as the server flushes them, before the COMMIT's.

For a transaction that is nothing but its statements (a message's turn: agents_app.turn_insert, where
`turn_create` is the outermost atomic block and its first statement is the turn's), psycopg sent the
COMMIT only once the statements' reply was read and Django's atomic block had ended: one more round
trip, and the web's own work (the Turn built, the call's return, Django's commit) before the COMMIT
left. Here the server runs the COMMIT (its WAL flush) right after the statements, while the caller
reads their results and runs `written(results)`, e.g. a turn's wake-up pushed with the COMMIT in
flight (bench/README.md, phase 25 (queue)).

The statements run as they would in the transaction: BEGIN, then each in order; a statement that fails
leaves the rest and the COMMIT unrun (the pipeline aborts to its Sync), the transaction failed as after
any failing statement, for Django's atomic block to roll back, and `written` is not called. A COMMIT that
fails (a deferred constraint) raises after `written` ran: what `written` starts must not assume the
commit (as with `on_commit_sent`'s `sent`); a `written` that raises is raised once the pipeline is read
to its end, whatever the COMMIT did (a turn it committed is then the sweeper's). Errors are Django's
(`wrap_database_errors`), and the one raised is the first met: a backend its server ends mid-pipeline sends
its FATAL error (AdminShutdown, 57P01) before it closes the socket, and that error is raised, not the closed
socket's read or libpq's refusal to leave pipeline mode; a connection that cannot leave it is closed, so that
neither its next statement nor the pool's next taker gets it in pipeline mode (tests/integration/
test_pipelined_errors.py). The atomic block that opened the transaction stays open until its own end: its
commit then finds the transaction done and sends nothing; its `on_commit` callbacks run there, after the
commit. Until then no statement may run on the connection (it would run in a transaction of its own,
after the commit): the backend's `create_cursor` refuses it.

`on_commit_sent` (adkweb.postgresql.base) asked while the COMMIT is in flight (from `written`) runs its
`sent()` at once and its `done()` after the atomic block's commit.

A statement given as `Prepared` (adkweb.postgresql.pipelined_prepared) is sent as `EXECUTE name(literals)`,
PREPAREd on the connection first; one whose connection lost it is sent again as text (that module says how).

The COMMIT releases the transaction's locks, and shows its rows, without waiting for its WAL to reach
the disk (`synchronous_commit` off for it alone): the worker's claim, already waiting on the session row
the turn's statements lock, runs while the WAL is flushed rather than after (the flush was 1.6-1.8 ms of
a 3-4 ms queue stage on a slow disk: bench/README.md, phase 30 (lead)). The caller is still answered
only once the transaction is on disk: the same write carries, after the COMMIT, `FLUSH`, a transaction of
its own that commits synchronously. It writes one WAL record (a transactional logical message, which
gives it an xid: a commit without WAL does not wait) and its commit waits until the WAL is flushed up to
that record, after the transaction's COMMIT record (one backend, one WAL: everything before it is on disk
too). `committed_with` returns, and the web answers, after that reply; a failed flush raises after the
COMMIT (what a COMMIT whose reply was lost leaves: the turn is the sweeper's and the retry's). Nothing a
turn does is done before that either: the worker's first step is an event append, a synchronous commit,
which flushes the turn's commit with it, before the model's answer or any tool. What another session sees
in the window is what an asynchronous commit shows: only PostgreSQL's own crash within it loses the turn,
and then the caller was not answered. Where this process's role may not call pg_logical_emit_message (read
once per process, `_flush_allowed`) the COMMIT waits for its flush as before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Sequence
from typing import Any

import psycopg
from psycopg import errors, generators, pq

from .pipelined_prepared import NO_SUCH_STATEMENT, Prepared, lost_here, usable

logger = logging.getLogger(__name__)
_SEP = "; "
_flushing: list[bool] = []  # whether this process's role may call pg_logical_emit_message (read once)

ASYNC = b"SET LOCAL synchronous_commit TO off"
FLUSH = b"SELECT pg_catalog.pg_logical_emit_message(true, 'adkweb.flush', '')"
_MAY_FLUSH = (
    b"SELECT coalesce(bool_or(has_function_privilege(oid, 'EXECUTE')), false) FROM pg_catalog.pg_proc "
    b"WHERE proname = 'pg_logical_emit_message' AND pronamespace = 'pg_catalog'::regnamespace"
)


def committed_with(
    cursor: Any, sql: str, params: Any, written: Callable[[list[Any]], object], statements: Sequence[Prepared] = ()
) -> list[Any]:
    """Run `BEGIN; sql; COMMIT` in one write (`sql`: statements separated by "; ", each with
    psycopg's client-side placeholders from `params`), through Django's execute wrappers (they see that
    text); `written(results)` once the statements' results are in, before the COMMIT's. Returns each
    statement's psycopg result (`pgresult`-level rows: `rows(result)`). A statement whose text is one of
    `statements`' is sent as its EXECUTE (prepared on the connection first if it is not yet)."""
    executor = _Executor(written, {s.text: s for s in statements})
    return cursor._execute_with_wrappers(f"BEGIN{_SEP}{sql}{_SEP}COMMIT", params, False, executor)


def rows(result: Any) -> list[tuple[Any, ...]]:
    """A statement's rows as text, each column decoded by the given result's types (ints and NULLs
    only here: the turn's ids and counts)."""
    return [
        tuple(None if (v := result.get_value(r, c)) is None else int(v) for c in range(result.nfields))
        for r in range(result.ntuples)
    ]


class _Executor:
    __slots__ = ("written", "statements")

    def __init__(self, written: Callable[[list[Any]], object], statements: dict[str, Prepared]) -> None:
        self.written = written
        self.statements = statements

    def __call__(self, sql: str, params: Any, many: bool, context: dict[str, Any]) -> list[Any]:
        db, cursor = context["connection"], context["cursor"]
        parts = sql.split(_SEP)
        if len(parts) < 3 or parts[0] != "BEGIN" or parts[-1] != "COMMIT":
            raise ValueError("committed_with: BEGIN; statements; COMMIT")
        raw = db.connection
        binder = cursor.cursor if hasattr(cursor.cursor, "mogrify") else psycopg.ClientCursor(raw)
        encoding = raw.info.encoding

        def queries(use: dict[str, Prepared]) -> list[bytes]:
            texts = [use[part].execute if part in use else part for part in parts[1:-1]]
            return [b"BEGIN"] + [binder.mogrify(text, params).encode(encoding) for text in texts]

        db.validate_no_broken_transaction()
        with db.wrap_database_errors, raw.lock:
            use = usable(raw, self.statements)
            flush = _flush_allowed(raw)
            db.commit_in_flight = True
            try:
                try:
                    results = raw.wait(_pipeline(raw.pgconn, queries(use), self.written, encoding, flush))
                except psycopg.Error as exc:
                    if not use or exc.sqlstate != NO_SUCH_STATEMENT:
                        raise
                    lost_here(raw)  # nothing ran but the BEGIN: rolled back, sent again as text
                    results = raw.wait(_pipeline(raw.pgconn, queries({}), self.written, encoding, flush))
            finally:
                db.commit_in_flight = False
        db.committed_ahead = True  # until the atomic block's end (its commit finds nothing to do)
        return results


def _flush_allowed(raw: Any) -> bool:
    """Whether this process's role may call pg_logical_emit_message (the `FLUSH` statement): read once,
    on an idle connection, the first time; where it may not, COMMITs wait for their flush as before."""
    if not _flushing:
        raw.pgconn.send_query(_MAY_FLUSH)
        (result,) = raw.wait(generators.execute(raw.pgconn))
        allowed = result.status == pq.ExecStatus.TUPLES_OK and result.get_value(0, 0) == b"t"
        if not allowed:
            logger.info("committed_with: pg_logical_emit_message is not allowed; COMMITs wait for their flush.")
        _flushing.append(allowed)
    return _flushing[0]


def _pipeline(
    pgconn: Any, queries: list[bytes], written: Callable[[list[Any]], object], encoding: str, flush: bool
) -> Generator[Any, Any, list[Any]]:
    """The pipeline sent and read. What it raises is the first failure: a statement's error result (also where
    the socket then closed: a backend ended by its server sends its FATAL error first), or `written`'s
    exception, not what reading the rest or leaving pipeline mode then met. A connection that cannot leave
    pipeline mode is closed (`_leave`): nothing may use it, nor a pool keep it."""
    pgconn.enter_pipeline_mode()
    tail = [ASYNC, b"COMMIT", FLUSH] if flush else [b"COMMIT"]  # the module's docstring: the COMMIT's flush
    failures: list[Any] = []  # the error results read, in order
    try:
        results = yield from _sent_and_read(pgconn, queries, tail, written, failures, encoding)
    except GeneratorExit:  # dropped unread (an interrupt in the wait): nothing can read it to its end now
        pgconn.finish()
        raise
    except BaseException as exc:
        yield from _to_sync(pgconn, 2 * (len(queries) + len(tail)) + 4)
        _leave(pgconn, quietly=True)
        if failures and isinstance(exc, psycopg.OperationalError) and exc.sqlstate is None:  # the socket's
            raise errors.error_from_result(failures[0], encoding=encoding) from exc
        raise
    _leave(pgconn, quietly=False)
    return results


def _sent_and_read(
    pgconn: Any,
    queries: list[bytes],
    tail: list[bytes],
    written: Callable[[list[Any]], object],
    failures: list[Any],
    encoding: str,
) -> Generator[Any, Any, list[Any]]:
    for query in queries:
        pgconn.send_query_params(query, None)
    pgconn.send_flush_request()  # the statements' results flushed before the COMMIT runs
    for query in tail:
        pgconn.send_query_params(query, None)
    pgconn.pipeline_sync()
    yield from generators.send(pgconn)
    results = []
    for _ in queries:
        results.append((yield from _result(pgconn, failures)))
    if not failures:
        written(results[1:])  # the BEGIN's left out
    tails = []
    for _ in tail:
        tails.append((yield from _result(pgconn, failures)))  # PIPELINE_ABORTED after a failed statement
    sync = yield from generators.fetch(pgconn)
    if sync is None or sync.status != pq.ExecStatus.PIPELINE_SYNC:
        raise errors.InternalError(f"expected the pipeline's sync, got {sync and pq.ExecStatus(sync.status).name}")
    if failures:
        raise errors.error_from_result(failures[0], encoding=encoding)
    commit = tails[tail.index(b"COMMIT")]
    if commit.status != pq.ExecStatus.COMMAND_OK:
        raise errors.InterfaceError(f"unexpected result {pq.ExecStatus(commit.status).name} from COMMIT")
    return results[1:]


def _to_sync(pgconn: Any, most: int) -> Generator[Any, Any, None]:
    """After an error on the way: read up to the pipeline's sync, so that the connection may leave pipeline
    mode usable. Quiet: the error on the way is the one raised."""
    try:
        for _ in range(most):
            res = yield from generators.fetch(pgconn)
            if res is not None and res.status == pq.ExecStatus.PIPELINE_SYNC:
                return
    except Exception:
        logger.warning("committed_with: the pipeline could not be read to its end.", exc_info=True)


def _leave(pgconn: Any, *, quietly: bool) -> None:
    """Out of pipeline mode; where libpq cannot (results unread: the pipeline not read to its sync, the socket
    lost), the connection is closed, never used in pipeline mode by the next statement or taker."""
    if pgconn.pipeline_status == pq.PipelineStatus.OFF:
        return
    try:
        pgconn.exit_pipeline_mode()
    except psycopg.Error:
        logger.warning("committed_with: the connection could not leave pipeline mode; it is closed.", exc_info=True)
        pgconn.finish()
        if not quietly:
            raise


def _result(pgconn: Any, failures: list[Any]) -> Generator[Any, Any, Any]:
    """One statement's result, and the end of its results (libpq's None between a pipeline's queries); an
    error result is added to `failures` as soon as it is read (the socket may close right after it)."""
    result = yield from generators.fetch(pgconn)
    if result is not None and result.status == pq.ExecStatus.FATAL_ERROR:
        failures.append(result)
    end = yield from generators.fetch(pgconn)
    if end is not None:
        raise errors.InternalError(f"more than one result from a pipelined statement: {end.status}")
    return result
