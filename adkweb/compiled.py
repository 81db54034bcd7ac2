"""Queries that every page asks with the same shape, built and compiled by the ORM once per process.

Building a query with nested `Exists` filters and compiling it costs more CPU than PostgreSQL takes to
answer it (issue 12, target 4). `exists_by_pk` keeps the compiled SQL of such a query for one `key`
(everything the query's shape depends on, e.g. who asks) and only changes the one parameter that
differs between calls: the pk of the row asked about.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.db import connection
from django.db.models import QuerySet

# A pk no row has, put in the query while it is compiled and found again among its parameters.
_SENTINEL = -7_301_555_000_000_017
MAX_ENTRIES = 4096  # per query name: one entry per person and query; past the cap they start again
_compiled: dict[str, dict[tuple, Any]] = {}
_lock = threading.Lock()


def compiled(name: str, key: tuple, compile_sql: Callable[[], Any]) -> Any:
    """What `compile_sql()` returns (its SQL and parameters), kept per process for the query `name`
    and `key` (which must name everything the SQL depends on), on this connection's database."""
    full_key = (connection.vendor, *key)
    entry = _compiled.get(name, {}).get(full_key)
    if entry is None:
        entry = compile_sql()
        with _lock:
            entries = _compiled.setdefault(name, {})
            if len(entries) >= MAX_ENTRIES:
                entries.clear()
            entries[full_key] = entry
    return entry


def _exists_sql(build: Callable[[int], QuerySet]) -> tuple[str, tuple, int | None]:
    """The EXISTS-style SQL of `build(pk)`, its parameters, and where the pk is among them (None when
    it is not exactly one parameter: then the ORM answers each call)."""
    sql, params = build(_SENTINEL).order_by().values("pk")[:1].query.sql_with_params()
    found = [i for i, p in enumerate(params) if p == _SENTINEL]
    return sql, tuple(params), found[0] if len(found) == 1 else None


def exists_by_pk(key: tuple, build: Callable[[int], QuerySet], pk: int) -> bool:
    """`build(pk).exists()`, compiled once per `key` (which must name everything `build` depends on
    but the pk). Falls back to the ORM if the pk is not exactly one parameter of the query."""
    sql, template, at = compiled("exists_by_pk", key, lambda: _exists_sql(build))
    if at is None:
        return build(pk).exists()
    params: list[Any] = list(template)
    params[at] = pk
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone() is not None
