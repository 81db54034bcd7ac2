"""The session store's statements prepared once per connection of the event loop's (agents_app.session_async).

Sent as text, each of them is parsed and planned by PostgreSQL every time: 0.05-0.5 ms a statement (the
append with the ticket rider's CTEs the most), ~2 ms of a seed flow's eleven statements and a third of a
delete's (bench/README.md, phase 20 (store)). Here a statement's text is PREPAREd the first time a
connection sends it (the parameters' types inferred by the server from where they are used) and from then
on sent as `EXECUTE name(literals)`: its parameters still bound on the client as before, its plan generic
(the loop's connections run with plan_cache_mode force_generic_plan: every statement here finds its rows
by key). What each statement reads, writes, locks and checks is unchanged: the same SQL, one implicit
transaction, the same errors.

A text whose PREPARE fails (a parameter whose type the server cannot infer) is sent as it is from then
on; so is every text once a connection has `_MAX` of them. A connection found to have lost what it prepared
(DISCARD ALL, a pooler in transaction mode: the EXECUTE fails before anything runs, and the statement is sent
again as text) prepares its statements again from its next one (adkweb.postgresql.prepared_here: text on it
after a few such losses). Everything is sent as text from the start where agents_app.pooler
says a pooler in transaction mode is in front (`ADKWEB_DB_POOLER=transaction`, or one recognised as a
connection opened). agents_app.turn_sql's drain statements go through here on the loop's connections too
(`execute`'s `statement`), as they go its own way on Django's.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from adkweb.postgresql.prepared_here import PreparedHere

from . import pooler

logger = logging.getLogger(__name__)

_MAX = 64  # statements prepared per connection; more are sent as text
NO_SUCH_STATEMENT = "26000"  # invalid_sql_statement_name: EXECUTE of a name the connection does not know
ALREADY_PREPARED = "42P05"  # duplicate_prepared_statement
PREFIX = "adkweb_store_"


@dataclass(frozen=True)
class Prepared:
    name: str
    prepare: str  # PREPARE name AS the statement, $n for its parameters
    execute: str  # EXECUTE name(%s, ...)
    before: tuple[Prepared, ...] = ()  # statements `execute` runs first (agents_app.turn_sql's lock): prepared first


_statements: dict[str, Prepared | None] = {}  # by the SQL text; None: sent as text (its PREPARE failed)
_here = PreparedHere("session store")  # connection -> names prepared (the drain's too, on the loop's connections)


def prepared(sql: str) -> Prepared | None:
    """The statement for `sql` (positional %s parameters), or None: sent as text."""
    if sql in _statements:
        return _statements[sql]
    if "%(" in sql:  # named parameters: not this module's
        _statements[sql] = None
        return None
    count = 0

    def dollar(match: re.Match[str]) -> str:
        nonlocal count
        if match.group() == "%%":
            return "%"
        count += 1
        return f"${count}"

    body = re.sub(r"%%|%s", dollar, sql)
    name = PREFIX + hashlib.sha1(body.encode()).hexdigest()[:16]
    execute = f"EXECUTE {name}(" + ", ".join(["%s"] * count) + ")" if count else f"EXECUTE {name}"
    found = _statements[sql] = Prepared(name, f"PREPARE {name} AS {body}", execute)
    return found


async def execute(cursor: psycopg.AsyncCursor[Any], sql: str, params: Any, statement: Prepared | None = None) -> None:
    """`sql` with `params` on the cursor's connection (autocommit): EXECUTE of its prepared statement,
    PREPAREd first if this connection has not yet; as text where it is not prepared. `statement`: the
    one to send for `sql` where it is built another way (agents_app.turn_sql's: its lock first)."""
    statement = None if pooler.text_only else statement or prepared(sql)
    ready = None if statement is None else _here.ready(cursor.connection)
    if statement is None or ready is None:
        await cursor.execute(sql, params)
        return
    for needed in (*statement.before, statement):
        if needed.name not in ready:
            if len(ready) >= _MAX or not await _prepare(cursor, sql, needed):
                await cursor.execute(sql, params)
                return
            ready.add(needed.name)
    bound = literal(statement.execute, params)
    try:
        await (cursor.execute(statement.execute, params) if bound is None else cursor.execute(bound))
    except psycopg.Error as exc:
        if exc.sqlstate != NO_SUCH_STATEMENT:
            raise
        lost(cursor.connection)  # nothing ran: the EXECUTE failed as it began
        await cursor.execute(sql, params)


def lost(conn: Any) -> None:
    """`conn` lost what it prepared (DISCARD ALL, a pooler): prepared again from its next statement."""
    _here.lost(conn)


def bound(conn: Any, statement: Prepared, params: Any) -> str | None:
    """`statement`'s EXECUTE with `params` written in (`literal`) where it and what it runs first are prepared
    on `conn` already: one complete text (agents_app.loop_raw sends it); None otherwise (`execute`'s way)."""
    if pooler.text_only:
        return None
    ready = _here.known(conn)
    if statement.name not in ready or any(b.name not in ready for b in statement.before):
        return None
    return literal(statement.execute, params)


async def _prepare(cursor: psycopg.AsyncCursor[Any], sql: str, statement: Prepared) -> bool:
    """PREPARE it on this connection (one already there under its name, whose text is in the name, will
    do). False when the server refuses it: the text is sent as it is, this time (from then on where the
    text is what it refused)."""
    try:
        await cursor.execute(statement.prepare)
    except psycopg.Error as exc:
        if exc.sqlstate == ALREADY_PREPARED:
            return True
        if cursor.connection.broken or cursor.connection.closed:
            raise
        if (exc.sqlstate or "").startswith("42"):  # the text itself (a parameter's type not inferred): for good
            _statements[sql] = None
        logger.warning("Could not prepare a session store statement (%s); sending it as text.", exc.sqlstate)
        return False
    return True


_PLAIN = re.compile(r"[0-9A-Za-z_.:-]*")  # a text that needs no escaping between single quotes


def literal(execute: str, params: Any) -> str | None:
    """`execute` (an EXECUTE with named %(name)s parameters: agents_app.turn_sql's claim and finish) with
    its literals written in, where every parameter is what those send: None, an int, an aware datetime, a
    text of the characters above (an owner's hex id, a status). None otherwise: psycopg binds them. On the
    claim's way before it leaves (psycopg's binding of its four: ~130 us after 5 ms idle, this ~50;
    bench/README.md, phase 23 (queue)); the server reads the same values (the statement's parameters
    are typed by its PREPARE)."""
    if not isinstance(params, Mapping):
        return None
    literals = {}
    for name, value in params.items():
        kind = type(value)
        if value is None:
            literals[name] = "NULL"
        elif kind is int:
            literals[name] = str(value)
        elif kind is str and _PLAIN.fullmatch(value):
            literals[name] = f"'{value}'"
        elif kind is datetime and value.tzinfo is not None:
            literals[name] = f"'{value.isoformat()}'::timestamptz"
        else:
            return None
    return execute % literals
