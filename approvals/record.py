"""The decision record: every Response is written here, and only here (append-only).

Each row keeps who decided as they were then (username and display name), so the record says who
decided even after the user is renamed or deleted, and is linked into the decision chain
(approvals.chain) in the same transaction, so changing it afterwards shows.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from django.db import connection, transaction
from django.db.models.expressions import DatabaseDefault
from django.utils import timezone

from adkweb import compiled, notify

from . import chain
from .models import Response


def person_snapshot(person: Any) -> tuple[str, str]:
    """(username, display name) of a person as they are now; ("", "") for no person."""
    if person is None or not getattr(person, "is_authenticated", False):
        return "", ""
    username = person.get_username()
    return username, (person.get_full_name() or "").strip() or username


def response_append(*, actor: Any = None, link: bool = True, **fields: Any) -> Response:
    """Store one decision row (inside the caller's transaction) and chain it; `link=False`: the
    caller chains its rows with `chain.link` last in its transaction (the chain's lock is then
    held the shortest time, and never while waiting for another lock)."""
    username, name = person_snapshot(actor)
    person = actor if username else None
    row = Response(actor=person, actor_username=username, actor_name=name, **fields)
    if connection.vendor == "sqlite":
        compiled.inserted(row)  # the ORM's INSERT, written once per process (no signal listens to it)
    else:
        row.save(force_insert=True)  # as objects.create
    if link:
        chain.link([row])
    return row


def _insert_fields() -> list[Any]:
    return [f for f in Response._meta.concrete_fields if not f.primary_key]


def response_append_with(
    write: tuple[str, list[Any]], *, notice: tuple[str, Any, dict] | None = None, actor: Any = None, **fields: Any
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
    check again, the row in its savepoint). Without an outbox `notify` records the notice. Not linked
    (the first decision ever: no head yet), the caller's `chain.link` links it."""
    username, name = person_snapshot(actor)
    person = actor if username else None
    row = Response(actor=person, actor_username=username, actor_name=name, **fields)
    ctes, params = [f"w AS ({write[0]})"], list(write[1])
    (outbox, owed), recorded = _outbox_for(notice), "NULL"
    if outbox is not None and notice is not None:
        event, ticket, data = notice
        now = timezone.now()
        if owed:
            into = f"INSERT INTO {outbox.table} (name, ticket_id, data, created_at)"
            ctes.append(f"ne AS ({into} VALUES (%s, %s, %s::jsonb, %s) RETURNING id)")
            params += [event, ticket.pk, json.dumps(data), now]
            recorded = "(SELECT id FROM ne)"
        else:  # owes nobody anything: recorded as done, nothing to do after commit (as notify records it)
            done = connection.ops.quote_name(outbox.done)
            into = f"INSERT INTO {outbox.table} (name, ticket_id, data, created_at, {done})"
            ctes.append(f"ne AS ({into} VALUES (%s, %s, %s::jsonb, %s, %s))")
            params += [event, ticket.pk, json.dumps(data), now, now]
    columns, values = [], []
    for field in _insert_fields():
        value = field.pre_save(row, True)
        columns.append(connection.ops.quote_name(field.column))
        if isinstance(value, DatabaseDefault):
            values.append("DEFAULT")
        else:
            values.append("%s")
            params.append(field.get_db_prep_save(value, connection))
    sql = (
        f"WITH {', '.join(ctes)} INSERT INTO {Response._meta.db_table} ({', '.join(columns)}) "
        f"VALUES ({', '.join(values)}) RETURNING {chain.STORED}, {recorded}; {chain.HEAD_LOCKED}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        *stored, recorded_id = cursor.fetchone()
        cursor.nextset()
        head = cursor.fetchone()
    row.pk = stored[0]
    row._state.adding, row._state.db = False, connection.alias
    if outbox is not None and recorded_id is not None:
        transaction.on_commit(partial(outbox.committed, recorded_id))
    chain.link_returned(row, head, stored)
    return row


def _outbox_for(notice: tuple[str, Any, dict] | None) -> tuple[notify.Outbox | None, bool]:
    """The outbox to write `notice` in, in the decision's statement, and whether the notice owes
    anything (False: its row is written as done); None: `notify` records it (now)."""
    if notice is None:
        return None, False
    event, ticket, data = notice
    outbox = notify.outbox()
    if outbox is not None:
        owed = outbox.owes(event, ticket)
        if owed or outbox.done:
            return outbox, owed
    notify.notify(event, ticket=ticket, data=data)
    return None, False
