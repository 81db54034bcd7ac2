"""The decision record: every Response is written here, and only here (append-only).

Each row keeps who decided as they were then (username and display name), so the record says who
decided even after the user is renamed or deleted, and is linked into the decision chain
(approvals.chain) in the same transaction, so changing it afterwards shows.
"""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.models.expressions import DatabaseDefault

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
    row = Response.objects.create(actor=person, actor_username=username, actor_name=name, **fields)
    if link:
        chain.link([row])
    return row


def _insert_fields() -> list[Any]:
    return [f for f in Response._meta.concrete_fields if not f.primary_key]


def response_append_with(write: tuple[str, list[Any]], *, actor: Any = None, **fields: Any) -> Response:
    """`response_append(link=False, ...)` on PostgreSQL in one statement with the caller's own write
    (`write`: SQL and parameters of an UPDATE, e.g. the decided ticket's), a data-modifying WITH beside
    the row's INSERT: one round trip, all or nothing, where the ORM's create (compiled per call) and
    the caller's UPDATE took two. The row is the ORM's: its fields' own `pre_save` (created_at) and
    database values, a column with a database default and no value left to it. The caller chains it."""
    username, name = person_snapshot(actor)
    person = actor if username else None
    row = Response(actor=person, actor_username=username, actor_name=name, **fields)
    columns, values, params = [], [], list(write[1])
    for field in _insert_fields():
        value = field.pre_save(row, True)
        columns.append(connection.ops.quote_name(field.column))
        if isinstance(value, DatabaseDefault):
            values.append("DEFAULT")
        else:
            values.append("%s")
            params.append(field.get_db_prep_save(value, connection))
    sql = (
        f"WITH w AS ({write[0]}) INSERT INTO {Response._meta.db_table} ({', '.join(columns)}) "
        f"VALUES ({', '.join(values)}) RETURNING id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row.pk = cursor.fetchone()[0]
    row._state.adding, row._state.db = False, connection.alias
    return row
