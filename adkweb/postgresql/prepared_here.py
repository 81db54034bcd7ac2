"""Which statements each connection has PREPAREd, as one module of prepared statements counts them
(adkweb.postgresql.pipelined, agents_app.loop_prepared, agents_app.turn_sql), and what a connection that lost
them does.

A server session's prepared statements go with a DISCARD ALL or DEALLOCATE ALL (an operator's, a pool's reset,
a pooler's server_reset_query) or with a pooler in transaction mode that hands the client another server
connection; the EXECUTE then fails before anything runs ("prepared statement ... does not exist", 26000) and
the statement is sent again as text. That connection (`lost`) forgets what it had and prepares again at its
next statement: the rest of the process, and this connection after it, go on with prepared statements, where
one DISCARD ALL used to turn the whole process to text statements for good (each parsed and planned every
time). A connection that loses them `LOSSES` times (a pooler in transaction mode that agents_app.pooler did not
recognise, a pool that resets each connection it is given back) sends text from then on: each loss costs a
PREPARE and a failed EXECUTE.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

logger = logging.getLogger(__name__)

LOSSES = 3  # a connection that lost its prepared statements this many times sends text from then on


class PreparedHere:
    """The names prepared on each connection (weakly: a closed connection's go with it) for one kind of
    statement (`what`, for the log)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._ready: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
        self._losses: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()

    def ready(self, conn: Any) -> set[str] | None:
        """The names prepared on `conn` (a set to add to once a PREPARE succeeded); None: it sends text."""
        if self._losses.get(conn, 0) >= LOSSES:
            return None
        return self._ready.setdefault(conn, set())

    def known(self, conn: Any) -> set[str]:
        """The names prepared on `conn`, nothing added (empty where it sends text)."""
        return self._ready.get(conn, set()) if self._losses.get(conn, 0) < LOSSES else set()

    def lost(self, conn: Any) -> None:
        """`conn`'s server no longer has what it prepared: prepared again at its next statement, or, after
        `LOSSES` times, never again on it."""
        self._ready.pop(conn, None)
        losses = self._losses[conn] = self._losses.get(conn, 0) + 1
        if losses < LOSSES:
            logger.warning("The %s's prepared statements were dropped by the server; preparing them again.", self.what)
        else:
            logger.warning(
                "The %s's prepared statements were dropped by the server %d times on one connection; "
                "it sends them as text from now on.",
                self.what,
                losses,
            )
