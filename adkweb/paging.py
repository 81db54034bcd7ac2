"""Paging lists that grow without bound (the inbox, conversations) at a constant cost per page.

- Counts are capped: a list counts at most COUNT_CAP + 1 matching rows (one `COUNT` over a
  `LIMIT`ed subquery), and shows "1,000+" beyond: an exact count of 100,000 tickets is a scan.
- Pages are read by keyset: "Next"/"Previous" links carry the sort key of the page's last/first
  row (`after=` / `before=`), so a deep page costs what the first one does; a bare `page=N`
  (an old link, a bookmark) still works by offset. The keys, their text in a URL and the conditions
  past them, are adkweb.paging_keys' (imported back here).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import BooleanField, QuerySet
from django.db.models.expressions import RawSQL

from .paging_keys import Bound, _key_bound, beyond, cursor_of, cursor_parse

# adkweb.paging_keys' are also read from here (approvals.selectors.inbox imports Bound, approvals.api
# cursor_parse, bench/pages.py cursor_of).

COUNT_CAP = 1000
# The largest page number a list seeks by offset (the inbox form's bound): past it, the page past the end.
# Unbounded, a typed page number times the page size overflowed the OFFSET (PostgreSQL's bigint, SQLite's
# int64) once a list counted past COUNT_CAP: a 500.
PAGE_MAX = 10_000_000
# `narrow(qs, n, order, bound)`: a queryset of rows of `qs` that holds its first n in `order` (when `order`
# is empty: n of its rows, any, or all of them if fewer): a list whose filter the planner cannot bound by
# the list's own indexes reads its first n another way (approvals.selectors, "mine": from a table of who
# takes part in which ticket). `bound`, when the page starts past a key, is that bound as SQL on another
# table's copy of the sort key and pk (a Bound, adkweb.paging_keys), so that the narrow's own index scan
# starts there too (`qs` is already filtered by it).
Narrow = Callable[[QuerySet, int, tuple[str, ...], "Bound | None"], QuerySet]


def _top(qs: QuerySet, n: int, order: tuple[str, ...], narrow: Narrow | None, bound: Bound | None = None) -> QuerySet:
    """The first n rows of `qs` in `order` (any n rows when `order` is empty)."""
    return (narrow(qs, n, order, bound) if narrow else qs).order_by(*order)[:n]


def capped_count(qs: QuerySet, *, ordered: bool = False) -> int:
    """How many rows match, counting no further than COUNT_CAP + 1 (more reads "1,000+").
    `ordered` keeps the queryset's order: where an index matches both the filter and the order
    (the conversations' status and recency), PostgreSQL then reads the first COUNT_CAP + 1 entries
    of that index; elsewhere (search, several filters) an unordered count stops sooner."""
    return (qs if ordered else qs.order_by())[: COUNT_CAP + 1].count()


def capped_count_narrowed(qs: QuerySet, narrow: Narrow | None, order: tuple[str, ...] = ()) -> int:
    """`capped_count` of `qs` read through `narrow` (see Narrow: COUNT_CAP + 1 of its rows, or all of
    them if fewer, so the count is exact below the cap)."""
    if narrow is None:
        return capped_count(qs.order_by(*order), ordered=bool(order))
    return _top(qs, COUNT_CAP + 1, order, narrow).count()


def count_label(count: int, noun: str) -> str:
    """ "3 tickets", "1 ticket", "1,000+ tickets"."""
    cap = COUNT_CAP
    if count > cap:
        return f"{cap:,}+ {noun}s"
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _from_row(
    qs: QuerySet, order: tuple[str, str], start: int, sort_field: str, descending: bool, narrow: Narrow | None = None
) -> Bound:
    """The rows from the `start`-th of `qs` in `order` on, as a Bound: `(field, pk)` compared with the
    key of that row, which a subquery finds by offset over the keys alone (no joins for the page's
    related rows, no columns but the two, the index on (field, pk) walked once; PostgreSQL runs it
    once, as an InitPlan). Past the end the subquery finds nothing and no row matches."""
    keys = (narrow(qs, start + 1, order, None) if narrow else qs).select_related(None).order_by(*order)
    keys = keys.values_list(sort_field, "pk")[start : start + 1]
    sql, params = keys.query.sql_with_params()

    def bound(column: str, pk_column: str) -> tuple[str, list[Any]]:
        return f"({column}, {pk_column}) {'<=' if descending else '>='} ({sql})", list(params)

    return bound


def _on_table(qs: QuerySet, sort_field: str, bound: Bound) -> RawSQL:
    """A Bound as a condition on `qs`'s own table."""
    model = qs.model
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    column, pk_column = model._meta.get_field(sort_field).column, model._meta.pk.column
    return RawSQL(*bound(f"{table}.{quote(column)}", f"{table}.{quote(pk_column)}"), output_field=BooleanField())


@dataclass
class KeysetPage:
    """One page of a list, with what its pager needs (a Django `Page`'s names where they apply)."""

    object_list: list[Any]
    number: int
    total: int  # capped: > COUNT_CAP means "more than COUNT_CAP"
    per_page: int
    sort_field: str
    more_after: bool
    more_before: bool
    extra: dict[str, Any] = field(default_factory=dict)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.object_list)

    def __len__(self) -> int:
        return len(self.object_list)

    def has_next(self) -> bool:
        return self.more_after

    def has_previous(self) -> bool:
        return self.more_before

    def has_other_pages(self) -> bool:
        return self.more_after or self.more_before

    def next_page_number(self) -> int:
        return self.number + 1

    def previous_page_number(self) -> int:
        return max(1, self.number - 1)

    @property
    def total_capped(self) -> bool:
        return self.total > COUNT_CAP

    @property
    def num_pages(self) -> int | None:
        """None when the count is capped (the pager then shows "Page N" alone)."""
        if self.total_capped:
            return None
        return max(1, -(-self.total // self.per_page))

    @property
    def next_cursor(self) -> str:
        return cursor_of(self.object_list[-1], self.sort_field) if self.object_list else ""

    @property
    def previous_cursor(self) -> str:
        return cursor_of(self.object_list[0], self.sort_field) if self.object_list else ""


def keyset_page(
    qs: QuerySet,
    *,
    sort_field: str,
    descending: bool,
    per_page: int,
    page: int = 1,
    after: str = "",
    before: str = "",
    kind: type = datetime,
    count_ordered: bool = False,
    narrow: Narrow | None = None,
) -> KeysetPage:
    """A page of `qs` ordered by (sort_field, pk): after/before a cursor when one is given, else
    the `page`-th by offset. Two queries: the capped count and the rows (one more than a page).
    `narrow` (see Narrow): how to read `qs`'s first rows, for every one of those queries."""
    order = (f"-{sort_field}", "-pk") if descending else (sort_field, "pk")
    total = capped_count_narrowed(qs, narrow, order if count_ordered else ())
    reverse = (sort_field, "pk") if descending else (f"-{sort_field}", "-pk")
    page = min(max(1, page), PAGE_MAX)
    key_after, key_before = cursor_parse(after, kind) if after else None, cursor_parse(before, kind) if before else None
    if key_before is not None and page > 1:
        bound = _key_bound(qs.model, sort_field, key_before, not descending)
        rows = list(
            _top(qs.filter(beyond(sort_field, key_before, not descending)), per_page + 1, reverse, narrow, bound)
        )
        if len(rows) > per_page:  # there are rows before this page too
            return KeysetPage(rows[:per_page][::-1], page, total, per_page, sort_field, True, True)
        page, key_after = 1, None  # back at the start: the first page, full
    if key_after is not None:
        bound = _key_bound(qs.model, sort_field, key_after, descending)
        rows = list(_top(qs.filter(beyond(sort_field, key_after, descending)), per_page + 1, order, narrow, bound))
        number = max(page, 2)
    else:
        if page > 1 and total <= COUNT_CAP:  # as Django's get_page: past the end shows the last page
            page = min(page, max(1, -(-total // per_page)))
        start = (page - 1) * per_page
        if start:  # a page number typed (or an old link): its first row sought, then read by keyset
            seek = _from_row(qs, order, start, sort_field, descending, narrow)
            rows = list(_top(qs.filter(_on_table(qs, sort_field, seek)), per_page + 1, order, narrow, seek))
        else:
            rows = list(_top(qs, per_page + 1, order, narrow))
        number = page
    return KeysetPage(rows[:per_page], number, total, per_page, sort_field, len(rows) > per_page, number > 1)


# A list's queryset (and its Narrow, or None) from its arguments (keyset_page_of).
Source = Callable[..., tuple[QuerySet, "Narrow | None"]]


def keyset_page_of(
    name: str,
    key: tuple,
    source: Source,
    args: tuple,
    *,
    sort_field: str,
    descending: bool,
    per_page: int,
    page: int = 1,
    after: str = "",
    before: str = "",
) -> KeysetPage:
    """`keyset_page(*source(*args), ...)` (a datetime sort field, an unordered capped count), with its
    count and its rows compiled once per shape (adkweb.shapes; `key`: everything `source` depends on
    but `args`, each an int, a str or a datetime): a page does not build and compile its queries
    again. A typed page number (an offset to seek) and whatever the shapes do not keep are the ORM's."""
    from . import shapes

    key_after = cursor_parse(after, datetime) if after else None
    key_before = cursor_parse(before, datetime) if before else None
    if page > 1 and key_after is None and key_before is None:  # a typed page number: its offset is SQL text
        qs, narrow = source(*args)
        return keyset_page(
            qs, sort_field=sort_field, descending=descending, per_page=per_page, page=page, narrow=narrow
        )
    order = (f"-{sort_field}", "-pk") if descending else (sort_field, "pk")
    reverse = (sort_field, "pk") if descending else (f"-{sort_field}", "-pk")
    n = len(args)

    def counted(*a: Any) -> QuerySet:
        qs, narrow = source(*a)
        return (narrow(qs, COUNT_CAP + 1, (), None) if narrow else qs).order_by().values("pk")[: COUNT_CAP + 1]

    def first(*a: Any) -> QuerySet:
        qs, narrow = source(*a)
        return _top(qs, per_page + 1, order, narrow)

    def beyond_key(way: tuple[str, ...], desc: bool) -> Callable[..., QuerySet]:
        def build(*a: Any) -> QuerySet:
            qs, narrow = source(*a[:n])
            at = (a[n], a[n + 1])
            bound = _key_bound(qs.model, sort_field, at, desc)
            return _top(qs.filter(beyond(sort_field, at, desc)), per_page + 1, way, narrow, bound)

        return build

    total = shapes.count(name, (*key, "count"), counted, *args)
    if key_before is not None and page > 1:
        shape = (*key, "before", per_page)
        rows = shapes.instances(name, shape, beyond_key(reverse, not descending), *args, *key_before)
        if len(rows) > per_page:  # there are rows before this page too
            return KeysetPage(rows[:per_page][::-1], page, total, per_page, sort_field, True, True)
        page, key_after = 1, None  # back at the start: the first page, full
    if key_after is not None:
        shape = (*key, "after", per_page)
        rows = shapes.instances(name, shape, beyond_key(order, descending), *args, *key_after)
        number = max(page, 2)
    else:
        rows = shapes.instances(name, (*key, "first", per_page), first, *args)
        number = 1
    return KeysetPage(rows[:per_page], number, total, per_page, sort_field, len(rows) > per_page, number > 1)
