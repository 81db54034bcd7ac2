"""`Model.objects.raw(sql, params)` without the RawQuerySet's per-call work.

Django's RawQuerySet works out, on every call, which of the statement's columns are the model's fields
and where (introspecting every field's column name twice), and the converters of those columns (asking
every field): ~0.18 ms of CPU a call on the embedded bench's VM before the first row is built, paid by
the hot paths' `UPDATE … RETURNING *` statements (a turn's claim, an event's append with its hooks, a
fan-out's claim of its deliveries). `raw` works that plan out once per connection and statement and
builds the instances as the RawQuerySet does (`from_db`, the same converters, the other columns set as
attributes), from a list rather than an iterator.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from django.core.exceptions import FieldDoesNotExist
from django.db import connection
from django.db.models import Model

M = TypeVar("M", bound=Model)
MAX_PLANS = 256  # per connection: statements are literals of the code (a few per IN-list length)


def raw(model: type[M], sql: str, params: Sequence[Any] = ()) -> list[M]:
    """`list(model.objects.raw(sql, params))` on this thread's connection (a sequence of parameters,
    adapted as RawQuery adapts them)."""
    adapt = connection.ops.adapt_unknown_value
    with connection.cursor() as cursor:
        cursor.execute(sql, tuple(adapt(p) for p in params))
        fetched = cursor.fetchall()
        description = cursor.description
    if not fetched:
        return []
    names, positions, extra, converters = _plan(model, sql, description)
    alias = connection.alias
    out = []
    for row in fetched:
        values = list(row)
        for i, convs, expression in converters:
            for convert in convs:
                values[i] = convert(values[i], expression, connection)
        instance = model.from_db(alias, names, [values[p] for p in positions])
        for column, pos in extra:
            setattr(instance, column, values[pos])
        out.append(instance)
    return out


def _plan(model: type[Model], sql: str, description: Any) -> tuple[list[str], list[int], list, list]:
    """RawModelIterable's plan for these columns: the fields' attnames and their positions, the other
    columns (set as attributes), and the fields' converters; once per connection (its backend's
    converters are bound to it), model and statement."""
    plans = getattr(connection, "adkweb_raw_plans", None)
    if plans is None:
        plans = {}
        setattr(connection, "adkweb_raw_plans", plans)  # noqa: B010  (this thread's connection, through the proxy)
    key = (model, sql)
    found = plans.get(key)
    if found is not None:
        return found
    identifier = connection.introspection.identifier_converter
    columns = [identifier(column[0]) for column in description]
    by_column = {identifier(f.column): f for f in model._meta.fields if f.column is not None}
    init = [f for column, f in by_column.items() if column in columns]
    names = [f.attname for f in init]
    if model._meta.pk is None or model._meta.pk.attname not in names:
        raise FieldDoesNotExist("Raw query must include the primary key")
    positions = [columns.index(column) for column, f in by_column.items() if column in columns]
    extra = [(column, pos) for pos, column in enumerate(columns) if column not in by_column]
    converters = []
    for i, column in enumerate(columns):
        field = by_column.get(column)
        if field is None:
            continue
        expression = field.get_col(field.model._meta.db_table)
        convs = connection.ops.get_db_converters(expression) + expression.get_db_converters(connection)
        if convs:
            converters.append((i, convs, expression))
    if len(plans) >= MAX_PLANS:
        plans.clear()
    found = plans[key] = (names, positions, extra, converters)
    return found
