"""The decision record: every Response is written here, and only here (append-only).

Each row keeps who decided as they were then (username and display name), so the record says who
decided even after the user is renamed or deleted, and is linked into the decision chain
(approvals.chain) in the same transaction, so changing it afterwards shows.
"""

from __future__ import annotations

import json
import logging
from functools import partial
from typing import Any

from django.db import DatabaseError, connection, transaction
from django.db.models.expressions import DatabaseDefault
from django.utils import timezone

from adkweb import compiled_insert, notify

from . import chain
from .models import Response

logger = logging.getLogger(__name__)
ACTOR_NAME_MAX = Response._meta.get_field("actor_name").max_length


def person_snapshot(person: Any) -> tuple[str, str]:
    """(username, display name) of a person as they are now; ("", "") for no person."""
    if person is None or not getattr(person, "is_authenticated", False):
        return "", ""
    username = person.get_username()
    # Django's first and last names hold 150 characters each: "first last" can be one more than the column.
    return username, ((person.get_full_name() or "").strip() or username)[:ACTOR_NAME_MAX]


def response_append(*, actor: Any = None, link: bool = True, **fields: Any) -> Response:
    """Store one decision row (inside the caller's transaction) and chain it; `link=False`: the
    caller chains its rows with `chain.link` last in its transaction (the chain's lock is then
    held the shortest time, and never while waiting for another lock)."""
    username, name = person_snapshot(actor)
    person = actor if username else None
    row = Response(actor=person, actor_username=username, actor_name=name, **fields)
    if connection.vendor == "sqlite":
        compiled_insert.inserted(row)  # the ORM's INSERT, written once per process (no signal listens to it)
    else:
        row.save(force_insert=True)  # as objects.create
    if link:
        chain.link([row])
    return row


def _insert_fields() -> list[Any]:
    return [f for f in Response._meta.concrete_fields if not f.primary_key]


def response_append_with(
    write: tuple[str, list[Any]],
    *,
    notice: tuple[str, Any, dict] | None = None,
    riding: Any = None,
    actor: Any = None,
    **fields: Any,
) -> Response:
    """`response_append(...)` on PostgreSQL in one round trip: one statement (a data-modifying WITH
    beside the row's INSERT: all or nothing) with the caller's own write (`write`: SQL and parameters
    of an UPDATE, e.g. the decided ticket's) and the notification of it (`notice`: event, ticket,
    data; adkweb.notify's outbox row, as approvals.ticket_rider writes a new ticket's), then the
    decision chain's head locked in the same query string; the row is linked from what its INSERT
    returned (chain.link_returned: one more statement), where the ORM's create (compiled per call),
    the caller's UPDATE, the outbox row's savepoint and the chain's read took four round trips. The
    row is the ORM's: its fields' own `pre_save` (created_at) and database values, a column with a
    database default and no value left to it. The outbox row holds nothing the decision's row does
    not (the status, the decider, the comment): refused, the decision would be too. An event that owes
    nobody anything (the requester's own decision, no endpoint subscribed) is written there as done
    (`Outbox.done`: no work after commit), where `notify` took its own round trips for it (the owed
    check again, the row in its savepoint); whether an endpoint subscribes is asked in the statement
    itself (`Outbox.owed_sql`: the row done unless one does; the statement then in a savepoint, and
    a failed question leaves the notice owed), where it was a round trip of its own before it, inside
    the transaction all the same. `riding` (agents_app.services.TurnRiding): the decision's turn written
    in the statement too (its CTEs; the row's turn is the one they insert), where it was a round trip
    before. Without an outbox `notify` records the notice. Not linked
    (the first decision ever: no head yet), the caller's `chain.link` links it."""
    username, name = person_snapshot(actor)
    person = actor if username else None
    row = Response(actor=person, actor_username=username, actor_name=name, **fields)
    outbox, owed = _outbox_for(notice)
    asked = isinstance(owed, tuple)  # the endpoints asked in the statement, in a savepoint of its own
    try:
        stored, recorded_id, head, turn_id = _appended(row, write, notice, outbox, owed, riding)
    except DatabaseError:
        if not asked:
            raise
        # The question failed (or the statement with it): undone to the savepoint; the notice is then
        # recorded owed (the fan-out decides), as a failed read of the endpoints always left it.
        with connection.cursor() as cursor:
            cursor.execute(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}; RELEASE SAVEPOINT {_SAVEPOINT}")
        logger.warning("Could not ask for webhook endpoints in a decision's statement; fanning it out.", exc_info=True)
        stored, recorded_id, head, turn_id = _appended(row, write, notice, outbox, True, riding)
    row.pk = stored[0]
    if riding is not None:
        row.turn = riding.written(turn_id)
    row._state.adding, row._state.db = False, connection.alias
    if outbox is not None and recorded_id is not None:
        transaction.on_commit(partial(outbox.committed, recorded_id))
    chain.link_returned(row, head, stored)
    return row


_SAVEPOINT = "adkweb_record"


def _appended(
    row: Response,
    write: tuple[str, list[Any]],
    notice: tuple[str, Any, dict] | None,
    outbox: notify.Outbox | None,
    owed: bool | tuple[str, list[Any]],
    riding: Any,
) -> tuple[list[Any], int | None, tuple, int | None]:
    """`response_append_with`'s statement, sent: the row's stored columns, the notice's row id when it
    is owed (None: none, or done), the chain's head (locked). `owed` an SQL condition: the notice's row
    is done unless it holds, and the statement goes in a savepoint (a failed question undoes only it)."""
    ctes, params = [f"w AS ({write[0]})"], list(write[1])
    if riding is not None:
        ctes.append(riding.sql)
        params += riding.params
    recorded = "NULL"
    if outbox is not None and notice is not None:
        event, ticket, data = notice
        now = timezone.now()
        if owed is True:
            into = f"INSERT INTO {outbox.table} (name, ticket_id, data, created_at)"
            ctes.append(f"ne AS ({into} VALUES (%s, %s, %s::jsonb, %s) RETURNING id)")
            params += [event, ticket.pk, json.dumps(data), now]
            recorded = "(SELECT id FROM ne)"
        else:  # done, or done unless the condition holds: nothing to do after commit for a done row
            done = connection.ops.quote_name(outbox.done)
            into = f"INSERT INTO {outbox.table} (name, ticket_id, data, created_at, {done})"
            params += [event, ticket.pk, json.dumps(data), now]
            if isinstance(owed, tuple):
                unless = f"CASE WHEN {owed[0]} THEN NULL ELSE %s END"
                ctes.append(f"ne AS ({into} VALUES (%s, %s, %s::jsonb, %s, {unless}) RETURNING id, {done})")
                params += [*owed[1], now]
                recorded = f"(SELECT id FROM ne WHERE {done} IS NULL)"
            else:
                ctes.append(f"ne AS ({into} VALUES (%s, %s, %s::jsonb, %s, %s))")
                params += [now]
    columns, values = [], []
    for field in _insert_fields():
        value = field.pre_save(row, True)
        columns.append(connection.ops.quote_name(field.column))
        if riding is not None and field.name == "turn":
            values.append("(SELECT id FROM tn)")
        elif isinstance(value, DatabaseDefault):
            values.append("DEFAULT")
        else:
            values.append("%s")
            params.append(field.get_db_prep_save(value, connection))
    sql = (
        f"WITH {', '.join(ctes)} INSERT INTO {Response._meta.db_table} ({', '.join(columns)}) "
        f"VALUES ({', '.join(values)}) RETURNING {chain.STORED}, {recorded}, {'turn_id' if riding else 'NULL'}; "
        f"{chain.HEAD_LOCKED}"
    )
    guarded = isinstance(owed, tuple)
    if guarded:
        sql = f"SAVEPOINT {_SAVEPOINT}; {sql}; RELEASE SAVEPOINT {_SAVEPOINT}"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        if guarded:
            cursor.nextset()  # past the savepoint's result
        *stored, recorded_id, turn_id = cursor.fetchone()
        cursor.nextset()
        head = cursor.fetchone()
    return stored, recorded_id, head, turn_id


def _outbox_for(notice: tuple[str, Any, dict] | None) -> tuple[notify.Outbox | None, bool | tuple[str, list[Any]]]:
    """The outbox to write `notice` in, in the decision's statement, and whether the notice owes
    anything (False: its row is written as done; an SQL condition: asked in the statement, the row done
    unless it holds); None: `notify` records it (now)."""
    if notice is None:
        return None, False
    event, ticket, data = notice
    outbox = notify.outbox()
    if outbox is not None and outbox.done and outbox.owed_sql is not None:
        return outbox, outbox.owed_sql(event, ticket)  # no round trip of its own for the endpoints
    if outbox is not None:
        owed = outbox.owes(event, ticket)
        if owed or outbox.done:
            return outbox, owed
    notify.notify(event, ticket=ticket, data=data)
    return None, False
