"""`inserted`: a model's INSERT written once per process (split out of adkweb.compiled, whose `compiled`
keeps its SQL)."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.models import Model
from django.db.models.expressions import DatabaseDefault

from .compiled import compiled


def inserted(row: Model) -> None:
    """`row.save(force_insert=True)` on SQLite for a model no signal listens to, in one `INSERT …
    RETURNING` whose SQL is written once per process (per model and columns left to the database):
    the ORM compiled it per call (~0.2-0.3 ms: a session's creation, a decision's row). The values are
    each field's own (`pre_save`: auto_now_add times; the driver's form: JSON, booleans); a field left
    to its database default (`db_default`, no value given) is left out of the INSERT, as SQLite takes
    it, and its value read back as the ORM reads it. Sets the pk and the row's saved state. No
    pre_save/post_save signal is sent: callers use it only for models nobody listens to."""
    meta = row._meta
    fields = [f for f in meta.concrete_fields if not f.primary_key]
    values = [f.pre_save(row, True) for f in fields]
    given = tuple(not isinstance(v, DatabaseDefault) for v in values)
    sql, returned = compiled("inserted", (meta.label, given), lambda: _insert_sql(meta, fields, given))
    params = [f.get_db_prep_save(v, connection) for f, v, g in zip(fields, values, given, strict=True) if g]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        found = cursor.fetchone()
    assert found is not None
    row.pk = found[0]
    for field, value in zip(returned, found[1:], strict=True):
        for convert in connection.ops.get_db_converters(field.cached_col) + field.get_db_converters(connection):
            value = convert(value, field.cached_col, connection)
        setattr(row, field.attname, value)
    row._state.adding, row._state.db = False, connection.alias


def _insert_sql(meta: Any, fields: list[Any], given: tuple[bool, ...]) -> tuple[str, list[Any]]:
    quote = connection.ops.quote_name
    columns = [quote(f.column) for f, g in zip(fields, given, strict=True) if g]
    defaulted = [f for f, g in zip(fields, given, strict=True) if not g]
    returning = ", ".join([quote(meta.pk.column), *(quote(f.column) for f in defaulted)])
    sql = (
        f"INSERT INTO {quote(meta.db_table)} ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))}) "
        f"RETURNING {returning}"
    )
    return sql, defaulted
