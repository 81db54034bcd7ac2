"""What the drain's statements answer (agents_app.turn_sql's `start` and `done_next`, and
agents_app.turn_sqlite's on SQLite): `Started` and `DoneNext` from their rows, the turn claimed as a
Turn (its JSON columns, read as text, parsed here), and what was read with it for its start (`Claim`:
its session's ids, the app's configuration stamp, the session as get_session reads it). Split out of
agents_app.turn_sql, which imports them back (the runner, turn_exec, turn_sqlite and tests read them
there).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.db import DEFAULT_DB_ALIAS

from . import session_sql
from .models import Turn
from .run_cache import STAMP_WIDTH, stamp_row
from .turn_statements import _FIELDS, _JSON


@dataclass(frozen=True)
class Claim:
    """What the statement that claimed a turn read for its start (agents_app.runner)."""

    app_name: str
    user_id: str
    session_id: str
    stamp_row: tuple | None  # run_cache.stamp_select's row of the app's configuration; None: there is none
    session: session_sql.Loaded | None = None  # the session as get_session reads it (None: not read)


@dataclass(frozen=True)
class Started:
    leased: bool  # the lease is ours now (the session owes work)
    # A turn is still marked running (its worker died), or the session was deleted (archived, its turns
    # closed there): claim through the ORM path (turn_close.turn_claim_next)
    orphan: bool
    turn: Turn | None  # the turn claimed, marked running
    claim: Claim | None = None  # read with it


@dataclass(frozen=True)
class DoneNext:
    leased: bool  # False: another worker owns the session now; nothing was changed
    finished: bool  # False: the turn was not running (nothing changed): let the ORM path say why
    # Another turn is marked running, or the session was deleted: the lease is kept, claim through the ORM path
    orphan: bool
    status: str  # the session's stored status now
    released: bool  # nothing owed: the lease was released in the same transaction
    turn: Turn | None  # the next turn, claimed
    claim: Claim | None = None  # read with it
    # The session's revision under the lock, after every event of the finished turn (None: not read,
    # e.g. turn_sqlite): carried by `turn.finished`, so that a follower that has accounted for every
    # revision up to it knows it has every event of the turn (agents_app.api.watch).
    revision: int | None = None


def _claimed(values: tuple) -> tuple[Turn | None, Claim | None]:
    """The claimed turn and what was read with it, from the row's columns after the statement's own."""
    width = len(_FIELDS)
    turn = _turn(values[:width])
    if turn is None:
        return None, None
    app_name, user_id, session_id = values[width : width + 3]
    stamp = values[width + 3 : width + 3 + STAMP_WIDTH]
    read = values[width + 3 + STAMP_WIDTH :]
    session = session_sql.loaded(read) if read and read[0] is not None else None
    return turn, Claim(app_name, user_id, session_id, stamp_row(stamp), session)


_ATTNAMES = [f.attname for f in _FIELDS]
_JSON_AT = tuple(i for i, f in enumerate(_FIELDS) if f.column in _JSON)  # `_COLUMNS`' JSON as text


def _turn(values: tuple) -> Turn | None:
    if values[0] is None:
        return None
    converted = list(values)  # only the JSON columns looked at (on the claim's way: its parse)
    for i in _JSON_AT:
        if isinstance(value := converted[i], (str, bytes)):
            converted[i] = json.loads(value)
    assert len(converted) == len(_FIELDS)
    return Turn.from_db(DEFAULT_DB_ALIAS, _ATTNAMES, converted)


def _started(row: tuple) -> Started:
    turn, claim = _claimed(row[2:])
    return Started(leased=bool(row[0]), orphan=bool(row[1]), turn=turn, claim=claim)


def _done(row: tuple) -> DoneNext:
    leased, finished, orphan, status, wrote = bool(row[0]), bool(row[1]), bool(row[2]), row[3], bool(row[4])
    turn, claim = _claimed(row[6:])
    released = wrote and turn is None and not orphan
    return DoneNext(leased, finished, orphan, status, released, turn, claim, revision=row[5])
