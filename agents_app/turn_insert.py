"""A new turn's writes on PostgreSQL in one round trip (issue 12, target 3's queue stage).

What the ORM did in three or four round trips, each compiled per call: the person's row locked and
their active turns counted (the cap, `turn_quota.turn_quota_check`), the Turn's INSERT, and its
post_save signal's `UPDATE session SET status = 'running'` (`session_status._now_running`). Here:

- without a cap to check: one statement, the UPDATE in a WITH, the INSERT reading its RETURNING;
- with one: the person's row lock, then one statement that counts their active turns (up to the
  cap: its snapshot is taken after the lock is granted, as before, so it sees a turn that a
  concurrent request committed meanwhile), and writes the status and inserts the turn only if the
  count is below the cap; two statements in one query string (`compiled.rows_after`'s way).
- when they are their transaction's first statements (a message's), its BEGIN leads that query
  string (`adkweb.compiled.begun_with`), where psycopg sends it as a round trip of its own.

Either way, the turn is inserted only if the status write matched the live session row, under its lock:
the UPDATE waits for the row's lock and checks the row again once it is granted, so a "delete" that
committed meanwhile (agents_app.session_archive; the sender read the session before) leaves it nothing
to match, and the INSERT, reading its RETURNING, nothing to write. The message is then refused as for
any deleted session (404: `session_gone`), where its turn was queued in the archived session, never to
run; the other way round, the archive, waiting for the row, finds the turn and refuses (409).

Every guarantee is the ORM path's: the same rows, the same locks in the same order (the person's
row, then the session row; the turn's foreign keys are checked at commit, as Django declares them
DEFERRABLE INITIALLY DEFERRED), the status written whatever it was (the write takes the session
row's lock that a recompute by a finishing turn takes, see session_status._now_running), the live
session's row only (`AdkSession.objects`). No post_save signal is sent: its one receiver's work
(session_status) is the statement's. The SQL is built once per process; the values are literals
(Django's psycopg cursors bind on the client), the JSON through the fields' own adaptation.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack, cast

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from adkweb.compiled import begins, begun_with
from adkweb.errors import NotFound
from adkweb.postgresql.pipelined import committed_with, rows
from adkweb.postgresql.pipelined_prepared import Prepared, prepared

from . import pooler
from .models import AdkSession, Turn

_COLUMNS = (
    "session_id, kind, content, state_delta, streaming, status, attempts, invocation_id, error, "
    "created_by_id, config_version_id, created_at, started_at, finished_at"
)
_VALUES = (
    "%(session)s, %(kind)s, %(content)s, %(state)s, %(streaming)s, 'queued', 0, %(invocation)s, '', "
    "%(user)s, NULL::bigint, %(now)s, NULL::timestamptz, NULL::timestamptz"
)
_SQL: dict[str, str] = {}


def _running(session: str) -> str:
    """The session's status as a new turn writes it (`session`: its parameter's placeholder). The live
    row by its primary key: `(archived_at IS NULL) IS TRUE` is no index condition (plain, the planner
    could walk every live session's entry of an archived_at index and filter it by id where the table's
    statistics were stale: tests/integration/test_turn_insert_plan.py)."""
    table = AdkSession._meta.db_table
    return f"UPDATE {table} SET status = 'running' WHERE id = {session} AND (archived_at IS NULL) IS TRUE"


def _positional(*, casts: bool) -> str:
    """_VALUES with positional placeholders, in its order (`_row`'s parameters, then now); without
    PostgreSQL's casts for SQLite."""
    values = re.sub(r"%\(\w+\)s", "%s", _VALUES)
    return values if casts else re.sub(r"::\w+", "", values)


def _sql(name: str) -> str:
    if not _SQL:  # built whole, then published in one step: another thread finds all of them or none
        turns, users = Turn._meta.db_table, get_user_model()._meta.db_table
        running = _running("%(session)s")
        insert = f"INSERT INTO {turns} ({_COLUMNS})"
        active = ", ".join(f"'{s}'" for s in (Turn.Status.QUEUED, Turn.Status.RUNNING))
        built = {
            "plain": f"WITH s AS ({running} RETURNING id) {insert} SELECT {_VALUES} FROM s RETURNING id",
            "lock": f"SELECT 1 FROM {users} WHERE id = %(user)s FOR NO KEY UPDATE",
            "capped": (
                f"WITH n AS (SELECT count(*) AS n FROM (SELECT 1 FROM {turns} WHERE created_by_id = %(user)s "
                f"AND status IN ({active}) LIMIT %(cap)s) a), "
                f"s AS ({running} AND (SELECT n FROM n) < %(cap)s RETURNING id), "
                f"t AS ({insert} SELECT {_VALUES} FROM s RETURNING id) "
                "SELECT n.n, (SELECT id FROM t) FROM n"
            ),
        }
        _SQL.update(built)
    return _SQL[name]


class TurnFields(TypedDict):
    """A new turn's own fields, as its inserts take them and `_queued` gives them to the Turn."""

    session: AdkSession
    kind: str
    content: dict[str, Any]
    state_delta: dict | None
    streaming: bool
    created_by: Any
    invocation_id: str


_ROW_NAMES = ("session", "kind", "content", "state", "streaming", "invocation", "user")  # _VALUES' names


def _row(fields: TurnFields) -> list[Any]:
    """The new turn's own columns' parameters, as its INSERTs bind them (in _ROW_NAMES' order)."""
    content_field, state_field = Turn._meta.get_field("content"), Turn._meta.get_field("state_delta")
    created_by = fields["created_by"]
    return [
        fields["session"].pk,
        fields["kind"],
        content_field.get_db_prep_save(fields["content"], connection),
        state_field.get_db_prep_save(fields["state_delta"], connection),
        fields["streaming"],
        fields["invocation_id"],
        created_by.pk if created_by is not None else None,
    ]


def turn_insert(
    *, cap: int, written: Callable[[], object] | None = None, ends: bool = False, **fields: Unpack[TurnFields]
) -> Turn | None:
    """The new queued Turn, inside the caller's transaction (PostgreSQL only). `cap` > 0 (and a
    person): refuse it when they have `cap` turns queued or running already (None: nothing was
    written; the caller says why); NotFound, nothing written, when the session is not live
    (`session_gone`). `written()` is called once the row is written, before the Turn is built (a
    message's wake-up leaves from there: agents_app.services.turn_add). `ends`: the transaction is
    these statements and nothing else (the caller's outermost atomic block ends with them,
    `written()` writes nothing): where they are its first, its BEGIN, they and its COMMIT go in one
    write (adkweb.postgresql.pipelined), `written()` called with the COMMIT in flight."""
    now, created_by = timezone.now(), fields["created_by"]
    params: dict[str, Any] = dict(zip(_ROW_NAMES, _row(fields), strict=True))
    params.update(now=now, cap=cap)
    capped = cap > 0 and created_by is not None
    sql = f"{_sql('lock')}; {_sql('capped')}" if capped else _sql("plain")
    if ends and begins():
        return _committed(sql, params, capped, written, now, fields)
    with connection.cursor() as cursor:
        if begins():  # a message's: the BEGIN leads the turn's statements (one round trip)
            begun_with(cursor, sql, params)
        else:
            cursor.execute(sql, params)
        if capped:
            cursor.nextset()  # past the person's lock
        turn_id = _inserted(cursor.fetchone(), cap if capped else 0, fields["session"])
    if turn_id is None:
        return None
    if written is not None:
        written()
    return _queued(turn_id, created_at=now, **fields)


def _committed(
    sql: str, params: dict[str, Any], capped: bool, written: Callable[[], object] | None, now: Any, fields: TurnFields
) -> Turn | None:
    """turn_insert's statements with their transaction's BEGIN and COMMIT in one write (the COMMIT not
    waiting for its flush, which rides after it: returned once the turn is on disk, adkweb.postgresql.pipelined)."""
    found: list[Any] = []

    def inserted(results: list[Any]) -> None:
        found.extend(rows(results[-1]))  # RETURNING id; the capped statement's (n, id)
        if found and found[0][-1] is not None and written is not None:
            written()

    with connection.cursor() as cursor:
        committed_with(cursor, sql, params, inserted, () if pooler.text_only else _prepared(capped))
    if not found or found[0][-1] is None:  # nothing written: the caller counts or refuses, in a new transaction
        cast(Any, connection).committed_ahead = False  # adkweb.postgresql.base
    turn_id = _inserted(found[0] if found else None, params["cap"] if capped else 0, fields["session"])
    return None if turn_id is None else _queued(turn_id, created_at=now, **fields)


def _inserted(row: tuple[Any, ...] | None, cap: int, session: AdkSession) -> int | None:
    """The new turn's id from the statement's row (the plain one's (id,), none when it inserted nothing;
    the capped one's (n, id)); None: refused by the cap, `cap` of the person's turns counted. Raises
    NotFound when the session is not live: archived (or gone) since its sender read it, whose archive
    committed before the session row's lock was granted to the status write (which then matched no row,
    and the INSERT, reading its RETURNING, wrote nothing)."""
    if row is not None and row[-1] is not None:
        return row[-1]
    if row is not None and cap > 0 and row[0] >= cap:
        return None
    raise session_gone(session)


def session_gone(session: AdkSession) -> NotFound:
    """The refusal of a turn for a session that is no longer live, as for any deleted session (404)."""
    return NotFound(f"Session not found: {session.session_id}")


_PREPARED: dict[bool, tuple[Prepared, ...]] = {}


def _prepared(capped: bool) -> tuple[Prepared, ...]:
    """The message's statements as prepared once per connection (the pipelined path's): the plain one, or
    the person's lock and the capped one."""
    if not _PREPARED:  # published in one step, as _sql's
        plain = (prepared("adkweb_turn_insert_", _sql("plain")),)
        capped_ones = tuple(prepared("adkweb_turn_insert_", _sql(n)) for n in ("lock", "capped"))
        _PREPARED.update({False: plain, True: capped_ones})
    return _PREPARED[capped]


_RIDING: list[str] = []


@dataclass
class TurnRiding:
    """An answer's turn whose writes ride in its caller's own statement (`turn_insert_riding`): the CTEs to
    put in it (`ts`, `tn`: `SELECT id FROM tn` is the turn's id) and their parameters; `written(id)`
    once that statement ran gives the Turn (and calls `wait`, agents_app.services.before_turn_commit's,
    as turn_add does once its turn is written)."""

    sql: str
    params: list[Any]
    make: Callable[[int], Turn]
    wait: Callable[[], object] | None = None

    def written(self, turn_id: int) -> Turn:
        turn = self.make(turn_id)
        if self.wait is not None:
            self.wait()
        return turn


def turn_insert_riding(*, wait: Callable[[], object] | None, **fields: Unpack[TurnFields]) -> TurnRiding:
    """A queued turn with no cap to check (an answer's) as two CTEs for a caller's own statement on
    PostgreSQL (e.g. a decision's record, approvals.record): `ts`, the session's status, as the plain
    statement writes it, and `tn`, the turn's INSERT (`SELECT id FROM tn`: its id), with their parameters
    in their order (positional). The same rows, locks and deferred foreign keys as `turn_insert`'s;
    inside the caller's transaction, which holds the live session's row already (so `ts` matches it)."""
    if not _RIDING:
        insert = f"INSERT INTO {Turn._meta.db_table} ({_COLUMNS}) VALUES ({_positional(casts=True)}) RETURNING id"
        _RIDING.append(f"ts AS ({_running('%s')}), tn AS ({insert})")
    now = timezone.now()
    params = [fields["session"].pk, *_row(fields), now]  # the status's, then the INSERT's
    return TurnRiding(_RIDING[0], params, lambda turn_id: _queued(turn_id, created_at=now, **fields), wait)


_SQLITE: dict[str, str] = {}


def turn_insert_sqlite(**fields: Unpack[TurnFields]) -> Turn:
    """The new queued Turn on SQLite (embedded mode), inside the caller's transaction: the session's
    status and the INSERT in two plain statements, where the ORM compiled the INSERT and its post_save
    receiver's UPDATE per call (~0.5 ms of a turn's CPU). The same rows as the ORM path's; no post_save
    signal is sent (its one receiver's work, session_status._now_running, is the first statement), as on
    PostgreSQL. No lock to take: SQLite's write transaction holds the file from its BEGIN (IMMEDIATE).
    The cap, if any, was checked before (turn_quota.turn_quota_check). NotFound, nothing written, when
    the status write matched no live session (archived since the sender read it, before this
    transaction began)."""
    if not _SQLITE:
        turns = Turn._meta.db_table
        insert = f"INSERT INTO {turns} ({_COLUMNS}) VALUES ({_positional(casts=False)}) RETURNING id"
        _SQLITE.update({"running": _running("%s"), "insert": insert})  # in one step, as _sql's
    now = timezone.now()
    params = [*_row(fields), connection.ops.adapt_datetimefield_value(now)]
    with connection.cursor() as cursor:
        cursor.execute(_SQLITE["running"], [fields["session"].pk])
        if cursor.rowcount == 0:  # archived (or gone) since its sender read it: nothing written
            raise session_gone(fields["session"])
        cursor.execute(_SQLITE["insert"], params)
        turn_id = cursor.fetchone()[0]
    return _queued(turn_id, created_at=now, **fields)


def _queued(turn_id: int, *, created_at: Any, **fields: Unpack[TurnFields]) -> Turn:
    """The Turn just inserted (queued, no attempt yet), as the ORM would have returned it from a save."""
    turn = Turn(
        id=turn_id,
        status=Turn.Status.QUEUED,
        attempts=0,
        error="",
        config_version=None,
        created_at=created_at,
        **fields,
    )
    turn._state.adding, turn._state.db = False, connection.alias
    turn._loaded_status = turn.status
    return turn
