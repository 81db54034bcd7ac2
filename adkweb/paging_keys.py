"""The keys of keyset paging (adkweb.paging): a row's (sort value, pk) as text in a URL (a pager's
`after=` / `before=` cursor) and back, and the rows past a key, as a Q on the list's table (`beyond`) or
as SQL on any two columns holding the sort key and pk (a Bound, `_key_bound`). Split out of
adkweb.paging, which imports them back.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import Q

from .http import number

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# A condition on rows past a key, as SQL on another table's copy of the sort key and pk:
# `bound(value_column, pk_column)` -> (sql, params) (adkweb.paging.Narrow's bound).
Bound = Callable[[str, str], tuple[str, list[Any]]]


def _encode(value: Any) -> str:
    if isinstance(value, datetime):
        return str((value - _EPOCH) // timedelta(microseconds=1))
    return repr(float(value))


def _decode(text: str, kind: type) -> Any:
    if kind is datetime:
        return _EPOCH + timedelta(microseconds=int(text))
    return float(text)


def cursor_of(row: Any, field_name: str) -> str:
    return f"{_encode(getattr(row, field_name))}_{row.pk}"


def cursor_parse(text: str, kind: type) -> tuple[Any, int] | None:
    """(value, pk) from a cursor, or None if it is not one (the list then starts from `page`). Its pk is
    a row's: 1 to a bigint's largest (`number`; past it, SQLite's driver refuses the SQL bound of
    `_key_bound` with OverflowError)."""
    try:
        raw, digits = text.split("_", 1)
        value, pk = _decode(raw, kind), number(digits)
    except (ValueError, OverflowError):
        return None
    return (value, pk) if pk else None


def beyond(field_name: str, key: tuple[Any, int], descending: bool) -> Q:
    """Rows after `key` in the order (field, pk) (descending or not), written so that the index on
    (field, pk) bounds the scan: `field <= v AND (field < v OR pk < id)`."""
    value, pk = key
    if descending:
        return Q(**{f"{field_name}__lte": value}) & (Q(**{f"{field_name}__lt": value}) | Q(pk__lt=pk))
    return Q(**{f"{field_name}__gte": value}) & (Q(**{f"{field_name}__gt": value}) | Q(pk__gt=pk))


def _key_bound(model: Any, field_name: str, key: tuple[Any, int], descending: bool) -> Bound:
    """`beyond` as a Bound (SQL on any two columns holding the sort key and pk), the value as the
    database stores it (SQLite compares datetimes as text)."""
    value = model._meta.get_field(field_name).get_db_prep_value(key[0], connection)
    op = "<" if descending else ">"

    def sql(column: str, pk_column: str) -> tuple[str, list[Any]]:
        return f"{column} {op}= %s AND ({column} {op} %s OR {pk_column} {op} %s)", [value, value, key[1]]

    return sql
