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
_compiled: dict[tuple, tuple[str, tuple, int]] = {}
MAX_ENTRIES = 4096
_lock = threading.Lock()


def exists_by_pk(key: tuple, build: Callable[[int], QuerySet], pk: int) -> bool:
    """`build(pk).exists()`, compiled once per `key` (which must name everything `build` depends on
    but the pk). Falls back to the ORM if the pk is not exactly one parameter of the query."""
    full_key = (connection.vendor, *key)
    entry = _compiled.get(full_key)
    if entry is None:
        compiled_sql, compiled_params = build(_SENTINEL).order_by().values("pk")[:1].query.sql_with_params()
        found = [i for i, p in enumerate(compiled_params) if p == _SENTINEL]
        if len(found) != 1:
            return build(pk).exists()
        entry = (compiled_sql, tuple(compiled_params), found[0])
        with _lock:
            if len(_compiled) >= MAX_ENTRIES:  # one per person and query: start again past the cap
                _compiled.clear()
            _compiled[full_key] = entry
    sql, template, at = entry
    params: list[Any] = list(template)
    params[at] = pk
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone() is not None
