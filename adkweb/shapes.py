"""Querysets that a page builds anew on every request, compiled once per shape (adkweb.compiled's idea
for whole lists: model rows with their joined relations, and capped counts).

A shape is everything a query's SQL depends on but its arguments (`key`); `build(*args)` builds the
queryset. The first call builds it with stand-ins for the arguments and keeps the SQL, where each
argument went among the parameters, and the ORM compiler that read the joined rows; it builds it once
more with other values (LIKE's special characters in the strings) and keeps the shape only if putting
those values in the kept parameters gives exactly the ORM's SQL and parameters. Later calls only put
their arguments in and execute. An argument may be an int, a str (as a whole parameter, or inside a
LIKE pattern: `icontains`), or a datetime; a shape whose arguments go anywhere else (into the SQL's text,
transformed) is not kept, and the ORM answers every call of it (e.g. SQLite, which binds datetimes as
text); so does a call whose arguments are not of the kept kinds or an int past a bigint (`_Shape.fits`).
Building an inbox's queries (visibility's nested `Exists`, "mine"'s subquery) and compiling them cost
more CPU than PostgreSQL took to answer them (issue 12, target 4).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.exceptions import EmptyResultSet, FieldError
from django.db import connections
from django.db.models import QuerySet
from django.db.models.query import get_related_populators

from .compiled import _converters, compiled

_INT = -7_301_555_000_000_100
_PROBE_INT = -7_301_555_000_000_900
_DATETIME = datetime(1971, 2, 3, 4, 5, 6, tzinfo=UTC)
_PROBE_DATETIME = datetime(1972, 3, 4, 5, 6, 7, tzinfo=UTC)
_BIGINT_MIN, _BIGINT_MAX = -(2**63), 2**63 - 1
_NOT_KEPT = False  # what the cache holds for a shape the ORM answers each time
# Shapes kept per name (a kept list query is ~10-20 KiB: its SQL, parameters and columns): each person's
# inbox has a few (count and rows, by filter set and order); past the cap they start again.
MAX_SHAPES = 512


def _stand_in(i: int, arg: Any) -> Any:
    if isinstance(arg, str):
        return f"\x01adkweb-shape-{i}\x01"
    if isinstance(arg, datetime):
        return _DATETIME + timedelta(microseconds=i + 1)
    return _INT - i


def _probe(i: int, arg: Any) -> Any:
    """Another value of the argument's kind (a string with LIKE's escapes to make)."""
    if isinstance(arg, str):
        return f"p%_\\{i}"
    if isinstance(arg, datetime):
        return _PROBE_DATETIME + timedelta(microseconds=i + 1)
    return _PROBE_INT - i


@dataclass(frozen=True)
class _Shape:
    sql: str
    template: tuple
    places: tuple[tuple[int, int | None], ...]  # (parameter, argument), None: str arguments in a pattern
    pattern: re.Pattern | None  # the str stand-ins, to replace inside LIKE patterns
    stand_ins: dict[str, int]  # str stand-in -> argument
    db: str
    # What the ORM's ModelIterable reads of its compiler (not the compiler: the query it holds weighs
    # ~60 KiB): the selected columns' expressions, the models' layout among them, annotations.
    columns: tuple
    klass_info: dict | None
    annotations: dict
    kinds: tuple[type, ...]  # each argument's type as kept: a call with others is the ORM's (`fits`)

    def fits(self, args: tuple) -> bool:
        """Whether `args` go where the kept ones went: the same types (a bool is no int here, nor a str
        one), each int a bigint's (past it SQLite's driver raises OverflowError, where the ORM's lookup
        knows no row has it)."""
        return tuple(map(_kind, args)) == self.kinds and all(
            _BIGINT_MIN <= a <= _BIGINT_MAX for a in args if _kind(a) is int
        )

    def params(self, args: tuple) -> list[Any]:
        params = list(self.template)
        ops = connections[self.db].ops
        for at, arg in self.places:
            if arg is not None:
                params[at] = args[arg]
            elif self.pattern is not None:  # one pass over the kept text: an argument's text is not read again
                params[at] = self.pattern.sub(lambda m: ops.prep_for_like_query(args[self.stand_ins[m[0]]]), params[at])
        return params


def _kind(arg: Any) -> type:
    """What a shape's argument is: a bool, an int, a str, a datetime (their subclasses as them), or else."""
    for kind in (bool, int, str, datetime):
        if isinstance(arg, kind):
            return kind
    return type(arg)


def _shape(build: Callable[..., QuerySet], args: tuple) -> _Shape | bool:
    if any(not isinstance(a, (str, int, datetime)) or isinstance(a, bool) for a in args):
        return _NOT_KEPT
    stand_ins = tuple(_stand_in(i, a) for i, a in enumerate(args))
    probes = tuple(_probe(i, a) for i, a in enumerate(args))
    try:
        qs = build(*stand_ins)
        compiler = qs.query.get_compiler(using=qs.db)
        sql, template = compiler.as_sql()
        probe_qs = build(*probes)
        probe_sql, probe_params = probe_qs.query.get_compiler(using=probe_qs.db).as_sql()
    except (EmptyResultSet, FieldError, ValueError, TypeError):
        return _NOT_KEPT
    texts = {s: i for i, s in enumerate(stand_ins) if isinstance(s, str)}
    pattern = re.compile("|".join(re.escape(s) for s in texts)) if texts else None
    places: list[tuple[int, int | None]] = []
    for at, param in enumerate(template):
        exact = [i for i, s in enumerate(stand_ins) if type(param) is type(s) and param == s]
        if exact:
            places.append((at, exact[0]))
        elif isinstance(param, str) and pattern is not None and pattern.search(param):
            places.append((at, None))
    columns = tuple((col,) for col, _, _ in compiler.select[: compiler.col_count])
    klass_info, annotations = compiler.klass_info, dict(compiler.annotation_col_map or {})
    kinds = tuple(map(_kind, args))
    shape = _Shape(sql, tuple(template), tuple(places), pattern, texts, qs.db, columns, klass_info, annotations, kinds)
    if probe_sql != sql or shape.params(probes) != list(probe_params) or compiler.has_extra_select:
        return _NOT_KEPT
    return shape


def _kept(name: str, key: tuple, build: Callable[..., QuerySet], args: tuple) -> _Shape | None:
    shape = compiled(name, key, lambda: _shape(build, args), limit=MAX_SHAPES)
    return shape if isinstance(shape, _Shape) and shape.fits(args) else None


def count(name: str, key: tuple, build: Callable[..., QuerySet], *args: Any) -> int:
    """How many rows `build(*args)` selects (build it as a `values("pk")` queryset, sliced to cap the
    count), compiled once per shape (`key`: everything the query depends on but `args`)."""
    shape = _kept(name, key, build, args)
    if shape is None:
        return build(*args).count()
    with connections[shape.db].cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM ({shape.sql}) subquery", shape.params(args))
        return cursor.fetchone()[0]


def instances(name: str, key: tuple, build: Callable[..., QuerySet], *args: Any) -> list[Any]:
    """`list(build(*args))`: model instances with what the queryset joins (select_related) attached, as
    the ORM's ModelIterable builds them, compiled once per shape (`key`: everything the query depends
    on but `args`)."""
    shape = _kept(name, key, build, args)
    if shape is None:
        return list(build(*args))
    connection = connections[shape.db]
    with connection.cursor() as cursor:
        cursor.execute(shape.sql, shape.params(args))
        fetched = cursor.fetchall()
    expressions = [col for (col,) in shape.columns]
    converters = _converters(name, key, expressions)
    klass_info = shape.klass_info
    assert klass_info is not None, "instances() of a values() query"
    model, (start, end) = klass_info["model"], (klass_info["select_fields"][0], klass_info["select_fields"][-1] + 1)
    init_list = [f[0].target.attname for f in shape.columns[start:end]]
    populators = get_related_populators(klass_info, shape.columns, shape.db)  # type: ignore[call-arg]  # (stubs: 6.0)
    out = []
    for fetched_row in fetched:
        row = list(fetched_row)
        for i, convs in converters:
            for convert in convs:
                row[i] = convert(row[i], expressions[i], connection)
        obj = model.from_db(shape.db, init_list, row[start:end])
        for populator in populators:
            populator.populate(row, obj)
        for attr, at in shape.annotations.items():
            setattr(obj, attr, row[at])
        out.append(obj)
    return out
