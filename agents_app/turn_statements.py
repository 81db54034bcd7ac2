"""The drain's two statements as text (agents_app.turn_sql sends them, prepared once per connection or
plain; its docstring says what each does and why): `_START` takes a session's lease and claims its
oldest queued turn, `_DONE_NEXT` finishes a turn and claims the next, each with what the claimed turn
starts from (its session's ids, the app's configuration stamp, the session as get_session reads it)."""

from __future__ import annotations

from . import session_sql
from .models import AdkSession, Turn
from .run_cache import stamp_select
from .session_status import ACTIVE_TURN_STATUSES, OPEN_TICKET_STATUSES

SESSIONS = AdkSession._meta.db_table
TURNS = Turn._meta.db_table
TICKETS = "approvals_pendingcall"  # approvals.models.PendingCall (agents_app does not import approvals)
_ACTIVE = ", ".join(f"'{s}'" for s in ACTIVE_TURN_STATUSES)
_OPEN = ", ".join(f"'{s}'" for s in OPEN_TICKET_STATUSES)
_FIELDS = [f for f in Turn._meta.concrete_fields]
# JSON as text on every connection (Django's loads jsonb as text; the loop's, agents_app.session_async,
# would decode it): agents_app.turn_rows' `_turn` parses it.
_JSON = {f.column for f in _FIELDS if f.get_internal_type() == "JSONField"}
_COLUMNS = ", ".join(f"t.{c}::text" if c in _JSON else f"t.{c}" for c in (f.column for f in _FIELDS))

# What a claimed turn starts from, returned with it: its session's app, user and session ids, and the
# stamp's row of the app's configuration (agents_app.run_cache), so that a turn whose runner is
# cached needs no other read before the agent runs. `s` is the statement's session row, `c` the claim.
_SESSION_COLUMNS = "app_name, user_id, session_id"
_CLAIMED = "LEFT JOIN s ss ON c.id IS NOT NULL LEFT JOIN LATERAL (" + stamp_select("ss.app_name") + ") k ON true"
# And the session as the Runner's first get_session reads it (session_sql.loaded_columns: its state,
# every event; from the statement's session row `s`, which also returns _READ), answered from here
# (session_service.read_ahead): one round trip less a turn. A copy that turns stale before the turn's
# first append is caught there as any stale copy is. None for an archived session (get finds none;
# none is claimed: `_GONE`).
_READ = "update_time, state, archived_at"
_LOADED = session_sql.loaded_columns("ss", pk="CASE WHEN ss.archived_at IS NULL THEN ss.id END")
_CLAIMED_COLUMNS = f"c.*, ss.app_name, ss.user_id, ss.session_id, k.*, {_LOADED}"

_LOCK = f"SELECT id FROM {SESSIONS} WHERE id = %(pk)s FOR NO KEY UPDATE; "

# The oldest queued turn, marked running (its attempt counted), if `gate` holds. The UPDATE reaches it
# by its id: its status is checked again on the row (`IS TRUE`: no index condition), or the generic
# plan, made while the table is small or its statistics stale, walked every queued turn's entry in
# the status index and filtered them by id (0.97 against 0.25 ms of the claim with 5,000 queued
# elsewhere: bench/README.md, phase 23 (queue); tests/integration/test_claim_plan.py).
_CLAIM = (
    f"c AS (UPDATE {TURNS} t SET status = 'running', attempts = t.attempts + 1, started_at = clock_timestamp() "
    f"WHERE t.id = (SELECT id FROM {TURNS} WHERE session_id = %(pk)s AND status = 'queued' ORDER BY id LIMIT 1) "
    "AND (t.status = 'queued') IS TRUE AND {gate} RETURNING " + _COLUMNS + ")"
)

# The session was deleted (archived; `s` is the session row, read or leased under its lock): nothing
# is claimed, and `orphan` sends the drain to the checked path (turn_close.turn_claim_next), which
# closes its owed turns failed, saying why, where a claimed turn met ADK's SessionNotFoundError, its
# close no lease (LeaseLost), and the sweeper queued it again, three times. One row of the statement's
# own, no read of its own: nothing more a claim.
_GONE = "EXISTS (SELECT 1 FROM s WHERE archived_at IS NOT NULL)"

# `start`'s and `done_next`'s transactions do not wait for their WAL to reach the disk (2-4 ms each
# on this VM's disk: of the queue stage, of every turn's end): see the module's docstring, "Both
# commit asynchronously".
_ASYNC = "SET LOCAL synchronous_commit TO off; "

_START = (
    _ASYNC
    + _LOCK
    + (
        f"WITH s AS (UPDATE {SESSIONS} SET lease_owner = %(owner)s, lease_expires_at = %(until)s "
        "WHERE id = %(pk)s AND (lease_owner = '' OR lease_expires_at < %(now)s OR lease_owner = %(owner)s) "
        f"AND EXISTS (SELECT 1 FROM {TURNS} WHERE session_id = %(pk)s AND status IN ({_ACTIVE})) "
        f"RETURNING id, {_SESSION_COLUMNS}, revision, {_READ}), "
        f"o AS (SELECT EXISTS (SELECT 1 FROM {TURNS} WHERE session_id = %(pk)s AND status = 'running') "
        f"OR {_GONE} AS orphan), "
        + _CLAIM.format(gate="EXISTS (SELECT 1 FROM s) AND NOT (SELECT orphan FROM o)")
        + f" SELECT (SELECT count(*) FROM s), (SELECT orphan FROM o), {_CLAIMED_COLUMNS} "
        "FROM (SELECT 1) one LEFT JOIN c ON true " + _CLAIMED
    )
)

# The session's status once turn %(tid)s is %(status)s (session_status.status_expression, with that
# turn's new status put in by hand: a statement does not see its own changes).
_STATUS = (
    f"CASE WHEN EXISTS (SELECT 1 FROM {TURNS} WHERE session_id = %(pk)s AND status IN ({_ACTIVE}) "
    "AND id <> %(tid)s) THEN 'running' "
    f"WHEN EXISTS (SELECT 1 FROM {TICKETS} WHERE session_id = %(pk)s AND status IN ({_OPEN})) THEN 'waiting' "
    f"WHEN (SELECT CASE WHEN id = %(tid)s THEN %(status)s ELSE status END FROM {TURNS} WHERE session_id = %(pk)s "
    "ORDER BY created_at DESC, id DESC LIMIT 1) = 'failed' THEN 'failed' ELSE 'idle' END"
)

_DONE_NEXT = (
    _ASYNC
    + _LOCK
    + (
        f"WITH s AS (SELECT id, {_SESSION_COLUMNS}, revision, {_READ} FROM {SESSIONS} "
        "WHERE id = %(pk)s AND lease_owner = %(owner)s), "
        f"f AS (UPDATE {TURNS} SET status = %(status)s, error = '', finished_at = clock_timestamp(), "
        "config_version_id = %(version)s WHERE id = %(tid)s "
        "AND session_id = %(pk)s AND status = 'running' AND EXISTS (SELECT 1 FROM s) RETURNING id), "
        f"o AS (SELECT EXISTS (SELECT 1 FROM {TURNS} WHERE session_id = %(pk)s AND status = 'running' "
        f"AND id <> %(tid)s) OR {_GONE} AS orphan), "
        + _CLAIM.format(gate="EXISTS (SELECT 1 FROM f) AND NOT (SELECT orphan FROM o)")
        + f", st AS (SELECT {_STATUS} AS now), "
        f"u AS (UPDATE {SESSIONS} SET status = st.now, "
        "lease_owner = CASE WHEN EXISTS (SELECT 1 FROM c) OR (SELECT orphan FROM o) THEN lease_owner ELSE '' END, "
        "lease_expires_at = CASE WHEN EXISTS (SELECT 1 FROM c) OR (SELECT orphan FROM o) THEN %(until)s ELSE NULL END "
        f"FROM st WHERE {SESSIONS}.id = %(pk)s AND EXISTS (SELECT 1 FROM f) RETURNING 1) "
        "SELECT (SELECT count(*) FROM s), (SELECT count(*) FROM f), (SELECT orphan FROM o), (SELECT now FROM st), "
        f"(SELECT count(*) FROM u), (SELECT revision FROM s), {_CLAIMED_COLUMNS} "
        "FROM (SELECT 1) one LEFT JOIN c ON true " + _CLAIMED
    )
)
