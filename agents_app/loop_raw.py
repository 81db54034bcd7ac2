"""The drain's claim and finish (agents_app.turn_sql) on a loop connection by libpq's own calls, not a cursor.

Once both of a statement's PREPAREs are on the connection (agents_app.loop_prepared) and its literals written in
(`loop_prepared.literal`), what leaves is one complete text, `EXECUTE lock(..); EXECUTE main(..)`, and what comes
back is the last statement's one row. psycopg's async cursor (the cursor, the query's conversion, each result's
selection, `nextset`, the fetch) costs ~40 us more of the loop's CPU a round trip than libpq's send, psycopg's own
wait and its row loader (~160 against ~120 us for a two-statement text at load 2.5; bench/README.md, phase 24
(drain)): ~0.08 ms a drained turn. The same text, the same results, the same errors: a failed statement is raised as
the cursor raises it (psycopg's error for its SQLSTATE, Django's by agents_app.session_async.on_connection), a
broken connection as psycopg's wait raises it. Anywhere else (not yet prepared there, a value `literal` leaves to
psycopg, prepared statements off) the cursor path, as before; a connection found to have lost what it prepared sends
the plain text this time and prepares them again after, as `loop_prepared.execute` does.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import errors, generators, pq
from psycopg.adapt import Transformer

from . import loop_prepared

_OK = (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK)
# Each connection's row loader, kept on it: a Transformer resolves a column type's loader once and keeps it (as a
# cursor's does across its executes), where a new one per row asked the connection's adapters again for every type
# (bench/README.md, phase 25 (drain)). On the connection, not in a weak dictionary: it refers to its connection, which
# a dictionary's value would then keep alive; as an attribute the two go together.
_LOADER = "_adkweb_row_loader"


async def last_row(
    conn: psycopg.AsyncConnection, sql: str, params: dict[str, Any], statement: loop_prepared.Prepared | None
) -> tuple | None:
    """`sql` with `params` on `conn` (autocommit): the first row of its last statement's result, or None.
    `statement`: its prepared form (None: the plain text, by the cursor)."""
    bound = loop_prepared.bound(conn, statement, params) if statement is not None else None
    if bound is None:
        return await _by_cursor(conn, sql, params, statement)
    try:
        return await _sent(conn, bound)
    except psycopg.Error as exc:
        if exc.sqlstate != loop_prepared.NO_SUCH_STATEMENT:
            raise
        loop_prepared.lost(conn)  # nothing ran: the lock's EXECUTE failed as it began, the whole text rolled back
        return await _by_cursor(conn, sql, params, None)


async def _sent(conn: psycopg.AsyncConnection, text: str) -> tuple | None:
    """One complete text (no parameters: ASCII, `literal`'s), its results read to the last one's first row."""
    async with conn.lock:  # the cursor's: nothing else on this connection meanwhile
        pgconn = conn.pgconn
        pgconn.send_query(text.encode())
        results = await conn.wait(generators.execute(pgconn))
    for result in results:
        if result.status not in _OK:
            raise _error(conn, result)
    last = results[-1] if results else None
    if last is None or not last.ntuples:
        return None
    loader = getattr(conn, _LOADER, None)
    if loader is None:  # the connection's loaders, as its cursors' (Django's time zone loader among them)
        loader = Transformer(conn)
        setattr(conn, _LOADER, loader)
    loader.set_pgresult(last)
    row: tuple = loader.load_row(0, tuple)
    return row


def _error(conn: psycopg.AsyncConnection, result: pq.abc.PGresult) -> psycopg.Error:
    if result.status == pq.ExecStatus.FATAL_ERROR:
        return errors.error_from_result(result, encoding=conn.info.encoding)
    return errors.InternalError(f"unexpected result status from the drain's statement: {result.status}")


async def _by_cursor(
    conn: psycopg.AsyncConnection, sql: str, params: dict[str, Any], statement: loop_prepared.Prepared | None
) -> tuple | None:
    async with conn.cursor() as cursor:
        if statement is None:
            await cursor.execute(sql, params)
        else:
            await loop_prepared.execute(cursor, sql, params, statement)
        while cursor.nextset():  # to the last statement's row
            pass
        return await cursor.fetchone()
