"""Behind a connection pooler (PgBouncer): what this process may keep on a database session.

A pooler in **transaction mode** hands each transaction of a client to whichever server connection is
free: a name PREPAREd on one is missing on the next ("prepared statement does not exist"), a PREPARE
may meet the name already there, a cursor declared WITH HOLD (Django's `.iterator()` outside a
transaction) is gone at its first FETCH, and a session-level SET stays on a server connection that
other clients use. In **session mode** a client keeps its server connection, so all of that works.
Either way PgBouncer 1.18 refuses a client that sends the `options` startup parameter (where adkweb
sends `-c jit=off`, and the event loop's connections their time zone and plan mode) unless its
`ignore_startup_parameters` lists it, and then drops it silently.

`settings.ADKWEB_DB_POOLER` (env `ADKWEB_DB_POOLER`):

- `transaction`: no startup options (adkweb/settings.py; agents_app.session_async sets the time zone,
  which PgBouncer tracks, after connecting), Django's server-side cursors off
  (`DISABLE_SERVER_SIDE_CURSORS`), and the session store's and the drain's statements sent as text:
  nothing outlives its transaction.
- `session`: no startup options (the loop's connections set their time zone and plan mode after
  connecting, session-level: their server is theirs); prepared statements and cursors as without one.
- `none`: no pooler: nothing is checked.
- unset (`auto`): as `none`, and each new connection is looked at (`connected`): PostgreSQL gives a
  client its backend's process id, PgBouncer a random number in its place, which no backend's can be
  (above Linux's largest `pid_max`, or negative) but once in ~1,000 connections. The first that looks
  pooled turns this process to `transaction`'s behaviour for good (logged once). Should that miss,
  a statement whose prepared name is missing still fails before anything runs and is sent again as
  text (agents_app.loop_prepared, agents_app.turn_sql), as before. The flag is read per statement
  (`text_only`) and set before the first statement of the connection that revealed the pooler.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

logger = logging.getLogger(__name__)

PID_MAX = 4_194_304  # Linux's largest pid_max (2**22): no PostgreSQL backend's process id is above it

text_only = False  # statements as text, no server-side cursors: a transaction-mode pooler, said or seen
_seen = False  # a pooler seen in auto mode (logged once)


def mode() -> str:
    return getattr(settings, "ADKWEB_DB_POOLER", "") or "auto"


def startup_options() -> bool:
    """May connections send the `options` startup parameter (PgBouncer refuses it)?"""
    return mode() in ("auto", "none")


def configure() -> None:
    """At startup (AgentsAppConfig.ready): the setting's `transaction` applied."""
    global text_only
    if mode() == "transaction":
        text_only = True


def looks_pooled(backend_pid: int) -> bool:
    return not 0 < backend_pid <= PID_MAX


def connected(backend_pid: int) -> None:
    """A new connection (Django's or the event loop's) whose server said `backend_pid`: in auto mode,
    one that is not a PostgreSQL backend's turns this process to statements as text and no
    server-side cursors."""
    global text_only, _seen
    if _seen or mode() != "auto" or not looks_pooled(backend_pid):
        return
    _seen = text_only = True
    connections.settings[DEFAULT_DB_ALIAS]["DISABLE_SERVER_SIDE_CURSORS"] = True
    logger.warning(
        "PostgreSQL is reached through a connection pooler (backend process id %s): this process sends its "
        "statements as text and uses no server-side cursors. Set ADKWEB_DB_POOLER=transaction or session "
        "to say which (see the README, Deploying to production).",
        backend_pid,
    )


def django_connected(sender: Any, connection: Any, **kwargs: Any) -> None:
    """Django's `connection_created` (every connection or pool checkout; nothing sent): ~0.2 us where
    no pooler is seen (the settings are read only for a process id that looks pooled)."""
    if not _seen and connection.vendor == "postgresql" and looks_pooled(connection.connection.pgconn.backend_pid):
        connected(connection.connection.pgconn.backend_pid)
