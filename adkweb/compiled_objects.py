"""Model instances with their `select_related` rows, from a query compiled once per connection.

`adkweb.compiled.instances` reads one model's rows; a page also reads rows with their related ones
(a ticket with its session and deciders, its responses with their actors): compiling such a query
(joins, every column of each model) cost 0.6-1.9 ms of CPU a query on the ticket page, more than
PostgreSQL took to answer it. `objects(name, key, build, *args)` is `list(build(*args))`: the query's
SQL, where each argument goes among its parameters, and the compiler's column map (which columns are
which model's, the annotations) are worked out once per connection and `(name, key)`; each call only
executes the SQL with its arguments and builds the instances as Django's ModelIterable does
(`from_db`, the related populators, the annotations, the fields' converters).

Queries it cannot take (a `prefetch_related`, `values()`, a combinator, an argument that is not a plain
parameter, an empty `IN`) are answered by the ORM each time, so the result is always `list(build(*args))`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import Model, QuerySet
from django.db.models import query as django_query
from django.db.models.query import ModelIterable

from .compiled import placed, stand_ins, unbindable

M = TypeVar("M", bound=Model)
MAX_PLANS = 512  # per connection; past it they start again


@dataclass
class _Plan:
    sql: str
    template: tuple
    places: list[tuple[int, int]]  # (position among the parameters, argument)
    compiler: Any
    converters: Any  # the columns' converters (the compiler's, worked out once: not on every call)
    model: type[Model]
    init_list: list[str]
    start: int
    end: int
    populators: list[Any]
    annotations: dict[str, int]
    trim: int | None  # the columns a row keeps (the compiler's extra select dropped), or None


def _plan(build: Callable[..., QuerySet], args: tuple) -> _Plan | None:
    sentinels = stand_ins(args)
    try:
        qs: Any = build(*sentinels)  # its private attributes: the stubs know a later Django
        if qs._prefetch_related_lookups or qs._iterable_class is not ModelIterable or qs.query.combinator:
            return None
        compiler = qs.query.get_compiler(using=qs.db)
        sql, params = compiler.as_sql()
    except (EmptyResultSet, ValueError, TypeError):
        return None
    places = placed(params, sentinels)
    select, klass_info = compiler.select, compiler.klass_info
    columns = [s[0] for s in select[0 : compiler.col_count]]
    if places is None or qs._known_related_objects or compiler.has_composite_fields(columns):
        return None
    fields = klass_info["select_fields"]
    start, end = fields[0], fields[-1] + 1
    return _Plan(
        sql=sql,
        template=tuple(params),
        places=places,
        compiler=compiler,
        converters=compiler.get_converters(columns),
        model=klass_info["model"],
        init_list=[f[0].target.attname for f in select[start:end]],
        start=start,
        end=end,
        populators=cast(Any, django_query).get_related_populators(klass_info, select, qs.db),
        annotations=dict(compiler.annotation_col_map),
        trim=compiler.col_count if compiler.has_extra_select else None,
    )


def objects(name: str, key: tuple, build: Callable[..., QuerySet[M]], *args: Any) -> list[M]:
    """`list(build(*args))`, compiled once per connection for `(name, key)`: `key` must name everything
    the query's shape depends on but `args` (each an int or a str the query takes as a parameter)."""
    plans = getattr(connection, "adkweb_object_plans", None)
    if plans is None:
        plans = {}
        setattr(connection, "adkweb_object_plans", plans)  # noqa: B010  (this thread's connection, through the proxy)
    full = (name, len(args), *key)
    if full not in plans:
        if len(plans) >= MAX_PLANS:
            plans.clear()
        plans[full] = _plan(build, args)
    plan = plans[full]
    if plan is None or unbindable(args):  # an id past a 64-bit integer: the ORM's no rows, not SQLite's 500
        return list(build(*args))
    params = list(plan.template)
    for at, arg in plan.places:
        params[at] = args[arg]
    with connection.cursor() as cursor:
        cursor.execute(plan.sql, params)
        fetched = cursor.fetchall()
    if plan.trim is not None:
        fetched = [row[: plan.trim] for row in fetched]
    alias = connection.alias
    found = []
    rows = plan.compiler.apply_converters(fetched, plan.converters) if plan.converters else fetched
    for row in rows:
        obj = plan.model.from_db(alias, plan.init_list, row[plan.start : plan.end])
        for populator in plan.populators:
            populator.populate(row, obj)
        for attr, at in plan.annotations.items():
            setattr(obj, attr, row[at])
        found.append(obj)
    return found
