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
(`wrap_database_errors`). The atomic block that opened the transaction stays open until its own end: its
commit then finds the transaction done and sends nothing; its `on_commit` callbacks run there, after the
commit. Until then no statement may run on the connection (it would run in a transaction of its own,
after the commit): the backend's `create_cursor` refuses it.

`on_commit_sent` (adkweb.postgresql.base) asked while the COMMIT is in flight (from `written`) runs its
`sent()` at once and its `done()` after the atomic block's commit.

A statement given as `Prepared` (`prepared`) is PREPAREd once per connection (a round trip of its own,
before the transaction's, the first time) and sent as `EXECUTE name(literals)`: parsed once and planned
with it (generic after PostgreSQL's first five), where its text was parsed, analysed and planned at every
message (bench/README.md, phase 26 (queue)). Django's execute wrappers still see its text. Where the server
lost what the connection prepared (DISCARD ALL, a pooler), the EXECUTE fails before anything is written: the
transaction (its BEGIN and nothing else) is rolled back, sent again as text, and from then on this process
sends text; a PREPARE the server refuses leaves that statement as text.

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

import hashlib
import logging
import re
import weakref
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import errors, generators, pq

logger = logging.getLogger(__name__)
_SEP = "; "
NO_SUCH_STATEMENT = "26000"  # invalid_sql_statement_name: an EXECUTE of a name the connection does not know
ALREADY_PREPARED = "42P05"  # duplicate_prepared_statement


@dataclass(frozen=True)
class Prepared:
    """A statement of `committed_with`'s (its `text`, named %(x)s placeholders) as PREPAREd and EXECUTEd."""

    text: str
    name: str
    prepare: str  # PREPARE name AS the text, $n for its placeholders (their types inferred by the server)
    execute: str  # EXECUTE name(%(x)s, ...)


def prepared(prefix: str, text: str) -> Prepared:
    """`text` to be prepared under `prefix` + a hash of its body (the same text, the same name)."""
    if "%%" in text or "%s" in text:
        raise ValueError("prepared: named placeholders only")
    names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", text)))
    body = text
    for i, name in enumerate(names, 1):
        body = body.replace(f"%({name})s", f"${i}")
    label = prefix + hashlib.sha1(body.encode()).hexdigest()[:16]
    execute = f"EXECUTE {label}(" + ", ".join(f"%({n})s" for n in names) + ")" if names else f"EXECUTE {label}"
    return Prepared(text, label, f"PREPARE {label} AS {body}", execute)


_ready: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()  # connection -> names prepared
_refused: set[str] = set()  # names whose PREPARE the server refused: sent as text
_lost: list[bool] = []  # a connection lost what it prepared: this process sends text
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
            use = _usable(raw, self.statements)
            flush = _flush_allowed(raw)
            db.commit_in_flight = True
            try:
                try:
                    results = raw.wait(_pipeline(raw.pgconn, queries(use), self.written, encoding, flush))
                except psycopg.Error as exc:
                    if not use or exc.sqlstate != NO_SUCH_STATEMENT:
                        raise
                    _lost_here(raw)  # nothing ran but the BEGIN: rolled back, sent again as text
                    results = raw.wait(_pipeline(raw.pgconn, queries({}), self.written, encoding, flush))
            finally:
                db.commit_in_flight = False
        db.committed_ahead = True  # until the atomic block's end (its commit finds nothing to do)
        return results


def _usable(raw: Any, statements: dict[str, Prepared]) -> dict[str, Prepared]:
    """Those of `statements` prepared on this connection (PREPAREd here the first time: the connection is
    idle, no transaction begun), by their text."""
    if not statements or _lost:
        return {}
    ready = _ready.setdefault(raw, set())
    use = {}
    for text, statement in statements.items():
        if statement.name not in ready and statement.name not in _refused:
            raw.pgconn.send_query(statement.prepare.encode(raw.info.encoding))
            (result,) = raw.wait(generators.execute(raw.pgconn))
            state = result.error_field(pq.DiagnosticField.SQLSTATE)
            if result.status == pq.ExecStatus.COMMAND_OK or state == ALREADY_PREPARED:  # its name says its text
                ready.add(statement.name)
            else:
                if (state or "").startswith("42"):  # the text itself (a placeholder's type not inferred): for good
                    _refused.add(statement.name)
                logger.warning("committed_with: could not prepare %s (%s); sending its text.", statement.name, state)
        if statement.name in ready:
            use[text] = statement
    return use


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


def _lost_here(raw: Any) -> None:
    _lost.append(True)
    logger.warning("committed_with: the connection's prepared statements were dropped by the server; using text.")
    raw.pgconn.send_query(b"ROLLBACK")
    raw.wait(generators.execute(raw.pgconn))


def _pipeline(
    pgconn: Any, queries: list[bytes], written: Callable[[list[Any]], object], encoding: str, flush: bool
) -> Generator[Any, Any, list[Any]]:
    pgconn.enter_pipeline_mode()
    synced = False
    try:
        for query in queries:
            pgconn.send_query_params(query, None)
        pgconn.send_flush_request()  # the statements' results flushed before the COMMIT runs
        tail = [ASYNC, b"COMMIT", FLUSH] if flush else [b"COMMIT"]  # the module's docstring: the COMMIT's flush
        for query in tail:
            pgconn.send_query_params(query, None)
        pgconn.pipeline_sync()
        yield from generators.send(pgconn)
        results = []
        for _ in queries:
            results.append((yield from _result(pgconn)))
        failed = next((r for r in results if r.status not in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK)), None)
        if failed is None:
            written(results[1:])  # the BEGIN's left out
        tails = []
        for _ in tail:
            tails.append((yield from _result(pgconn)))  # PIPELINE_ABORTED after a failed statement
        sync = yield from generators.fetch(pgconn)
        synced = sync is not None and sync.status == pq.ExecStatus.PIPELINE_SYNC
        commit = tails[tail.index(b"COMMIT")]
        for result in (failed, *tails):
            if result is not None and result.status == pq.ExecStatus.FATAL_ERROR:
                raise errors.error_from_result(result, encoding=encoding)
        if commit.status != pq.ExecStatus.COMMAND_OK:
            raise errors.InterfaceError(f"unexpected result {pq.ExecStatus(commit.status).name} from COMMIT")
        return results[1:]
    finally:
        if not synced:  # an error on the way: read to the Sync, so that the connection leaves pipeline mode usable
            try:
                for _ in range(2 * (len(queries) + len(tail)) + 4):
                    res = yield from generators.fetch(pgconn)
                    if res is not None and res.status == pq.ExecStatus.PIPELINE_SYNC:
                        break
            except Exception:
                logger.warning("committed_with: the pipeline could not be read to its end.", exc_info=True)
        pgconn.exit_pipeline_mode()


def _result(pgconn: Any) -> Generator[Any, Any, Any]:
    """One statement's result, and the end of its results (libpq's None between a pipeline's queries)."""
    result = yield from generators.fetch(pgconn)
    end = yield from generators.fetch(pgconn)
    if end is not None:
        raise errors.InternalError(f"more than one result from a pipelined statement: {end.status}")
    return result
