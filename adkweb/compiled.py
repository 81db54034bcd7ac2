"""Queries that every page asks with the same shape, built and compiled by the ORM once per process.

Building a query with nested `Exists` filters and compiling it costs more CPU than PostgreSQL takes to
answer it (issue 12, target 4). `exists_by_pk` keeps the compiled SQL of such a query for one `key`
(everything the query's shape depends on, e.g. who asks) and only changes the one parameter that
differs between calls: the pk of the row asked about. `rows` does the same for a `values_list` query
with any few int or str parameters (the API's token lookup, `/run`'s reads of its turn), and `instances`
the same for a query of one model's rows (a notification's event, ticket and turn by pk).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import connection
from django.db.models import Model, QuerySet

from .compiled_begin import begins, begun_with

# A pk no row has, put in the query while it is compiled and found again among its parameters.
_SENTINEL = -7_301_555_000_000_017
MAX_ENTRIES = 4096  # per query name: one entry per person and query; past the cap they start again
_compiled: dict[str, dict[tuple, Any]] = {}
_lock = threading.Lock()
M = TypeVar("M", bound=Model)
__all__ = ["begins", "begun_with"]  # adkweb.compiled_begin's, imported from here (agents_app.turn_insert)


def compiled(name: str, key: tuple, compile_sql: Callable[[], Any], limit: int = MAX_ENTRIES) -> Any:
    """What `compile_sql()` returns (its SQL and parameters), kept per process for the query `name`
    and `key` (which must name everything the SQL depends on), on this connection's database; at
    most `limit` keys per name (past it they start again)."""
    full_key = (connection.vendor, *key)
    entry = _compiled.get(name, {}).get(full_key)
    if entry is None:
        entry = compile_sql()
        with _lock:
            entries = _compiled.setdefault(name, {})
            if len(entries) >= limit:
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
    if at is None or unbindable((pk,)):
        return build(pk).exists()
    params: list[Any] = list(template)
    params[at] = pk
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone() is not None


def unbindable(args: tuple) -> bool:
    """Whether an argument is an int past a 64-bit integer (an id from a URL: `<int:...>` takes any
    digits). SQLite's driver refuses to bind it (OverflowError: a 500) where the ORM, which its compiled
    query stands in for, answers it with no rows, as for any unknown id: such a call goes to the ORM."""
    return any(type(a) is int and not -(2**63) <= a < 2**63 for a in args)


def _sentinel(i: int, arg: Any) -> Any:
    """A value of the argument's type that no real call passes, to find it among the parameters."""
    if isinstance(arg, str):
        return f"\x01adkweb-compiled-{i}\x01"
    return _SENTINEL - i


def stand_ins(args: tuple) -> tuple:
    """A stand-in for each argument (`_sentinel`), to build the query with and find them in its parameters."""
    return tuple(_sentinel(i, a) for i, a in enumerate(args))


def placed(params: Any, sentinels: tuple) -> list[tuple[int, int]] | None:
    """Where each argument goes among the compiled query's parameters, as (position, argument) pairs;
    None when an argument is not found there (not a plain parameter: the ORM answers each call)."""
    places = [(i, sentinels.index(p)) for i, p in enumerate(params) if p in sentinels]
    return places if len({arg for _, arg in places}) == len(sentinels) else None


def _rows_sql(build: Callable[..., QuerySet], sentinels: tuple) -> tuple[str, tuple, list | None, list]:
    """The SQL of `build(*sentinels)` (a `values_list` query), its parameters, where each argument
    goes among them ((position, argument) pairs; None when an argument is not found there), and the
    selected expressions (their converters turn database values into Python ones)."""
    try:
        qs = build(*sentinels)
        compiler = qs.query.get_compiler(using=qs.db)
        sql, params = compiler.as_sql()
    except (ValueError, TypeError):  # a stand-in the query cannot take (e.g. a slice's bound): the ORM answers
        return "", (), None, []
    expressions = [col for col, _, _ in compiler.select]
    return sql, tuple(params), placed(params, sentinels), expressions


def rows(name: str, key: tuple, build: Callable[..., QuerySet], *args: Any) -> list[list[Any]]:
    """See `rows_after` (without a statement before)."""
    return rows_after(None, name, key, build, *args)[1]


def rows_after(
    lead: tuple[str, list[Any]] | None,
    name: str,
    key: tuple,
    build: Callable[..., QuerySet],
    *args: Any,
    trail: str = "",
    begin: bool = False,
) -> tuple[list[tuple], list[list[Any]]]:
    """`build(*args)`'s rows (`build` returns a `values_list` query), compiled once per `key` (which
    must name everything the query's shape depends on but `args`; each argument an int or a str that
    the query uses as a parameter). Values come back as the ORM gives them (the fields' converters:
    JSON decoded, SQLite's datetimes parsed). Falls back to the ORM when an argument is not a plain
    parameter of the query.

    `lead`: a statement (SQL, parameters) run first, in the same round trip on PostgreSQL (one query
    string: two statements, in this order), its rows returned as they come (e.g. a lock to take before
    the query's own). Elsewhere it is executed first, on its own. `trail`: a statement without
    parameters or rows run after the query, the same way (e.g. the release of a savepoint `lead` took).
    `begin`: when `lead` would be its transaction's first statement (`begins()`), the transaction's BEGIN
    leads the query string too (`begun_with`): one round trip for the three. Several leading statements:
    `rows_after_each`."""
    leads, found = rows_after_each([] if lead is None else [lead], name, key, build, *args, trail=trail, begin=begin)
    return (leads[0] if leads else []), found


def rows_after_each(
    leads: list[tuple[str, list[Any]]],
    name: str,
    key: tuple,
    build: Callable[..., QuerySet],
    *args: Any,
    trail: str = "",
    begin: bool = False,
) -> tuple[list[list[tuple]], list[list[Any]]]:
    """`rows_after` with any number of leading statements, run in their order before the query (in its
    round trip on PostgreSQL: each statement of a query string takes its own snapshot, so one after a lock
    sees what the lock waited for): the rows of each, and the query's."""
    sentinels = stand_ins(args)
    sql, template, places, expressions = compiled(name, key, lambda: _rows_sql(build, sentinels))
    lead_rows: list[list[tuple]] = []
    if places is None or unbindable(args):
        lead_rows = [_execute(*lead) for lead in leads]
        found = [list(row) for row in build(*args)]
        if trail:
            _execute(trail, [])
        return lead_rows, found
    params: list[Any] = list(template)
    for at, arg in places:
        params[at] = args[arg]
    with connection.cursor() as cursor:
        together = connection.vendor == "postgresql"
        if leads and together:
            text = "; ".join([*(lead[0] for lead in leads), sql, *([trail] if trail else [])])
            lead_params = [p for lead in leads for p in lead[1]]
            if begin and begins():
                begun_with(cursor, text, [*lead_params, *params])
            else:
                cursor.execute(text, [*lead_params, *params])
            for _ in leads:
                lead_rows.append(cursor.fetchall() if cursor.description is not None else [])  # a SAVEPOINT has none
                cursor.nextset()
        elif leads:
            for lead in leads:
                cursor.execute(*lead)
                lead_rows.append(cursor.fetchall() if cursor.description is not None else [])
            cursor.execute(sql, params)
        else:
            cursor.execute(f"{sql}; {trail}" if trail and together else sql, params)
        fetched = cursor.fetchall()
        if trail and not together:
            cursor.execute(trail)
    return lead_rows, _converted(name, key, expressions, fetched)


def _converted(name: str, key: tuple, expressions: list[Any], fetched: list[tuple]) -> list[list[Any]]:
    converters = _converters(name, key, expressions)
    out = []
    for row in fetched:
        values = list(row)
        for i, convs in converters:
            for convert in convs:
                values[i] = convert(values[i], expressions[i], connection)
        out.append(values)
    return out


@dataclass
class Ride:
    """A `rows` query (name, key, build, args: as `rows` takes them) to send in the round trip of
    another (`rows_both`), and its rows once it has been (None: not sent)."""

    name: str
    key: tuple
    build: Callable[..., QuerySet]
    args: tuple
    rows: list[list[Any]] | None = None


def rows_both(name: str, key: tuple, build: Callable[..., QuerySet], args: tuple, ride: Ride) -> list[list[Any]]:
    """`rows(name, key, build, *args)`, and `ride`'s query after it in the same round trip on PostgreSQL
    (one query string, in this order; each compiled once per process, its values converted as `rows`
    gives them): its rows are left in `ride.rows`. Elsewhere, or when an argument is not a plain
    parameter of either query, the first alone (the ride is not sent)."""
    prepared = []
    for q_name, q_key, q_build, q_args in ((name, key, build, args), (ride.name, ride.key, ride.build, ride.args)):
        sentinels = stand_ins(q_args)
        sql, template, places, expressions = compiled(q_name, q_key, lambda: _rows_sql(q_build, sentinels))  # noqa: B023
        if places is None or connection.vendor != "postgresql":
            return rows(name, key, build, *args)
        params: list[Any] = list(template)
        for at, arg in places:
            params[at] = q_args[arg]
        prepared.append((q_name, q_key, sql, params, expressions))
    (first, first_key, first_sql, first_params, first_exp), (_, ride_key, ride_sql, ride_params, ride_exp) = prepared
    with connection.cursor() as cursor:
        cursor.execute(f"{first_sql}; {ride_sql}", [*first_params, *ride_params])
        fetched = cursor.fetchall()
        cursor.nextset()
        ridden = cursor.fetchall()
    ride.rows = _converted(ride.name, ride_key, ride_exp, ridden)
    return _converted(first, first_key, first_exp, fetched)


def instances(
    model: type[M],
    name: str,
    build: Callable[..., QuerySet],
    *args: Any,
    lead: tuple[str, list[Any]] | None = None,
    trail: str = "",
) -> list[M]:
    """`list(build(*args))` (a QuerySet of `model`'s rows, every concrete field loaded), compiled once per
    process as `rows` is (`name` must name everything the query's shape depends on but `args`): the
    instances built as the ORM builds them (`from_db`: the same converters, values, loaded state).
    `lead`, `trail`: as `rows_after`'s (their rows are not returned)."""
    fields = [f.attname for f in model._meta.concrete_fields]
    found = rows_after(lead, name, (), lambda *a: build(*a).values_list(*fields), *args, trail=trail)[1]
    return [model.from_db(connection.alias, fields, row) for row in found]


def _converters(name: str, key: tuple, expressions: list[Any]) -> list[tuple[int, list[Any]]]:
    """The ORM's converters of a compiled query's columns, by column, worked out once per connection
    (its backend's are bound to it) and query, not on every call: asking each column for them cost
    0.25-0.4 ms of CPU for a row of 35-50 columns (a click reads two such rows before its decision)."""
    known = getattr(connection, "adkweb_row_converters", None)
    if known is None:
        known = {}
        setattr(connection, "adkweb_row_converters", known)  # noqa: B010  (this thread's connection, through the proxy)
    found = known.get((name, key))
    if found is None or found[0] is not expressions:  # new, or the query compiled again since
        converters = [
            (i, convs)
            for i, expression in enumerate(expressions)
            if (convs := connection.ops.get_db_converters(expression) + expression.get_db_converters(connection))
        ]
        if len(known) >= MAX_ENTRIES:
            known.clear()
        found = known[(name, key)] = (expressions, converters)
    return found[1]


def _execute(sql: str, params: list[Any]) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()
