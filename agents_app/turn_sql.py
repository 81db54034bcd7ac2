"""The drain's bookkeeping on PostgreSQL in one round trip each (agents_app.runner uses it there;
their rows read as Started / DoneNext and the claimed Turn: agents_app.turn_rows, imported back here).

A drain used to take its lease, claim a turn, finish it, claim the next, release the lease and
look again for owed work in some fourteen statements and five transactions (each BEGIN and
COMMIT a round trip of its own), the ORM compiling most of them every turn. Here:

    start        take the lease (only when the session owes work) and claim its oldest queued turn
    done_next    the running turn done (with the agent configuration version it ran with), the
                 next queued turn claimed (or the lease released when nothing is owed), the
                 session's stored status written (agents_app.session_status)

Each is sent as two statements in one query string (the simple query protocol: Django's psycopg
cursors bind parameters on the client), which PostgreSQL runs as one implicit transaction, rolled
back as a whole if either fails. Both are prepared ones (planned once per connection: `_run`); the
first also sets the transaction's commit and plan modes (as SET LOCAL does). The first locks
the session row (FOR NO KEY UPDATE); the second takes its snapshot once the lock is granted, so it
sees every transaction that committed before (the rule agents_app.session_status keeps: the last
transaction to touch a session's turns and tickets writes its status from everything committed).
Whoever queues a turn takes that row lock in the same transaction (session_status's `_now_running`):
so a turn queued while `done_next` waits for the lock is seen and claimed, and one queued after it
released the lease is enqueued after that commit and finds the lease free. No second look for owed
work is needed.

A turn's started_at and finished_at are stamped as its row is written, once the locks are held
(clock_timestamp(), this host's clock as the ORM's timezone.now() is), where the ORM path stamped
them after its locking reads: the queue and run stages (bench/turn_path.py) mean the same on both.

Both commit asynchronously (synchronous_commit off for their own transaction only): PostgreSQL
answers before their WAL is flushed, which it does within a fraction of a second, and at once with
any later synchronous commit, which flushes everything before it (the WAL is one sequence: a later
commit on disk means every earlier one is). Only a crash of PostgreSQL itself in that window can
lose one, and what it leaves is a state a dead worker leaves too:

- `start` lost: nothing the turn did is stored either (its events are synchronous commits, after
  the claim): the turn is queued again, its attempt not counted, and runs from the start, as a turn
  whose worker died before storing anything does.
- `done_next` lost (the turn's end, the next turn's claim, the lease's release, the stored status,
  all or nothing): every event of the turn is on disk (synchronous commits before it), the turn is
  still marked running under a lease that runs out, the next turn still queued. The sweeper hands
  the session to a worker, whose checked path finds the turn's invocation ended in what is stored
  (turn_exec.turn_plan) and closes it DONE without calling the model or a tool again, then claims
  the next turn. Pages and API followers were told "done" and the status after the statement; they
  are told again when it is closed. (tests/integration/test_drain_async_done.py runs that recovery
  with a real worker.) A wall-clock WAL flush per turn (2.5-3 ms on this VM's disk) for that.

What these do not handle (a turn still marked running by a worker that died, a turn to fail or to
requeue, the owed turns of a conversation deleted meanwhile) goes through the ORM path in
agents_app.runner as before: `start` and `done_next` say so (`orphan`, `finished`) rather than decide it.

The drain sends both from its event loop (`astart`, `adone_next`: the same text on one of the loop's
connections, agents_app.session_async, which the session store's appends use too), not by a hop to
the loop's database thread and back on Django's connection: each is its own transaction on whichever
connection sends it, so nothing here depends on which one. With no loop connection free it takes the
thread (`start`, `done_next`). A broken connection's statement is not sent again: as on the thread,
the error ends the drain and the lease runs out.
"""

from __future__ import annotations

import hashlib
import logging
import re
from datetime import datetime
from typing import Any

from django.db import ProgrammingError, connection

from adkweb.postgresql.prepared_here import PreparedHere

from . import loop_prepared, loop_raw, pooler, session_async
from .turn_rows import Claim, DoneNext, Started, _done, _started  # noqa: F401 - Claim re-exported (turn_exec, tests)
from .turn_statements import (  # noqa: F401 - re-exported (tests and benches read the statements here)
    _ASYNC,
    _CLAIM,
    _DONE_NEXT,
    _FIELDS,
    _JSON,
    _LOCK,
    _START,
    SESSIONS,
    TICKETS,
    TURNS,
)

logger = logging.getLogger(__name__)


# The second statement of each, prepared once per connection (PREPARE, its generic plan kept): the
# big WITH is planned once instead of every turn (0.5 ms quiet, 2-5 ms at load 7 on this VM: the
# planning was more than half the claim's time). The PREPARE is sent once per pooled connection, as
# a statement of its own (a prepared statement outlives a rolled-back transaction, so it is known
# prepared only once that statement succeeded); then `EXECUTE lock(pk); EXECUTE name(literals)` is
# sent, one implicit transaction. The lock is prepared too (`_LOCK`'s statement, `_LOCKED`): the plain
# SQL's three statements before the WITH (the commit mode, the lock, then the plan mode) are one,
# parsed and planned once per connection (PostgreSQL's CPU a turn: -30 us for `done_next`, -20 us for
# `start`; bench/README.md, phase 20 (drain)). A connection whose statements are gone (DISCARD ALL, a
# pooler in transaction mode) gets an error before anything is committed: the plain statement is sent
# this time, and that connection prepares them again next time (`_here`: adkweb.postgresql.prepared_here,
# text on it after a few such losses; on the loop's connections, `_arun`, agents_app.loop_prepared
# prepares them and keeps its own). Where agents_app.pooler says such a pooler is there (`text_only`),
# the plain statement from the start.
_TYPES = {"pk": "bigint", "tid": "bigint", "version": "bigint", "owner": "text", "status": "text"}
_TYPES.update(until="timestamptz", now="timestamptz")
_HEAD_END = "FOR NO KEY UPDATE; "  # the lock's end: what follows is the statement prepared

# The plain SQL's head (`_ASYNC`, `_LOCK`) as one statement: set_config(..., true) is SET LOCAL (for
# this transaction only; the plan mode for the EXECUTE that follows). Per row locked: a session that
# is not there sets nothing, and then the statement that follows changes nothing either.
_LOCK_BODY = (
    "SELECT set_config('synchronous_commit', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true) "
    f"FROM {SESSIONS} WHERE id = $1 FOR NO KEY UPDATE"
)
_LOCK_NAME = "adkweb_turn_lock_" + hashlib.sha1(_LOCK_BODY.encode()).hexdigest()[:16]
_LOCKED = loop_prepared.Prepared(_LOCK_NAME, f"PREPARE {_LOCK_NAME}(bigint) AS {_LOCK_BODY}", "")


_statements: dict[str, loop_prepared.Prepared] = {}  # by the plain SQL (a test's or a probe's variant gets its own)
_here = PreparedHere("drain")  # Django's psycopg connection -> names prepared


def _prepared(sql: str) -> loop_prepared.Prepared:
    found = _statements.get(sql)
    if found is None:
        head, body = sql.split(_HEAD_END, 1)
        assert head + _HEAD_END == _ASYNC + _LOCK  # what `_LOCKED` does
        names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", body)))
        for i, name in enumerate(names, 1):
            body = body.replace(f"%({name})s", f"${i}")
        label = "adkweb_turn_" + hashlib.sha1(body.encode()).hexdigest()[:16]
        types = ", ".join(_TYPES[n] for n in names)
        execute = f"EXECUTE {_LOCK_NAME}(%(pk)s); EXECUTE {label}(" + ", ".join(f"%({n})s" for n in names) + ")"
        prepare = f"PREPARE {label}({types}) AS {body}"
        found = _statements[sql] = loop_prepared.Prepared(label, prepare, execute, before=(_LOCKED,))
    return found


def _prepare(cursor: Any, statement: loop_prepared.Prepared) -> None:
    """PREPARE it on this connection; one already there under that name (its text is in the name:
    the same statement, e.g. a pooler's server connection that another client prepared) will do."""
    try:
        cursor.execute(statement.prepare)
    except ProgrammingError as exc:
        if getattr(exc.__cause__, "sqlstate", None) != loop_prepared.ALREADY_PREPARED or connection.in_atomic_block:
            raise


def _run(sql: str, params: dict[str, Any]) -> tuple:
    with connection.cursor() as cursor:
        ready = None if pooler.text_only else _here.ready(connection.connection)
        if ready is None:
            cursor.execute(sql, params)
        else:
            statement = _prepared(sql)
            for needed in (*statement.before, statement):
                if needed.name not in ready:
                    _prepare(cursor, needed)
                    ready.add(needed.name)
            try:
                cursor.execute(statement.execute, params)
            except ProgrammingError as exc:
                if (
                    getattr(exc.__cause__, "sqlstate", None) != loop_prepared.NO_SUCH_STATEMENT
                    or connection.in_atomic_block
                ):
                    raise
                # Rolled back whole (one implicit transaction): nothing was done; say it as before.
                _here.lost(connection.connection)
                cursor.execute(sql, params)
        while cursor.nextset():  # to the last statement's row
            pass
        row = cursor.fetchone()
    assert row is not None
    return row


async def _arun(sql: str, params: dict[str, Any]) -> tuple:
    """`_run` from the event loop, on one of its connections (agents_app.session_async): the same
    statements, prepared once per connection (agents_app.loop_prepared, which prepares the session
    store's statements there too), with no hop to the database thread. Busy: no connection free,
    nothing sent (take the thread path)."""

    async def run(conn: Any) -> tuple | None:  # by libpq's calls once prepared there (agents_app.loop_raw)
        return await loop_raw.last_row(conn, sql, params, None if pooler.text_only else _prepared(sql))

    row = await session_async.on_connection(run, again_if_lost=False)  # a claim or a finish is not sent twice
    assert row is not None
    return row


def start(*, session_pk: int, owner: str, until: datetime, now: datetime) -> Started:
    """Take the session's lease if it owes work and is free (or ours), and claim its oldest queued
    turn unless one is still marked running."""
    return _started(_run(_START, _start_params(session_pk, owner, until, now)))


async def astart(*, session_pk: int, owner: str, until: datetime, now: datetime) -> Started:
    """`start` sent from the event loop (`_arun`; session_async.Busy: nothing was sent)."""
    return _started(await _arun(_START, _start_params(session_pk, owner, until, now)))


def _start_params(session_pk: int, owner: str, until: datetime, now: datetime) -> dict[str, Any]:
    return {"pk": session_pk, "owner": owner, "until": until, "now": now}


def done_next(
    *, turn_id: int, session_pk: int, owner: str, until: datetime, now: datetime, config_version: int | None = None
) -> DoneNext:
    """Turn `turn_id` (running, under our lease) done, with the agent configuration version it ran
    with; the next queued turn claimed, or the lease released when nothing is owed; the session's
    status written. All or nothing."""
    return _done(_run(_DONE_NEXT, _done_params(turn_id, session_pk, owner, until, now, config_version)))


async def adone_next(
    *, turn_id: int, session_pk: int, owner: str, until: datetime, now: datetime, config_version: int | None = None
) -> DoneNext:
    """`done_next` sent from the event loop (`_arun`; session_async.Busy: nothing was sent)."""
    return _done(await _arun(_DONE_NEXT, _done_params(turn_id, session_pk, owner, until, now, config_version)))


def _done_params(
    turn_id: int, session_pk: int, owner: str, until: datetime, now: datetime, config_version: int | None
) -> dict[str, Any]:
    params: dict[str, Any] = {"pk": session_pk, "owner": owner, "until": until, "now": now, "tid": turn_id}
    params.update(status="done", version=config_version)
    return params
