"""Row locks Django's ORM does not spell: FOR SHARE (`select_for_update` takes FOR UPDATE or FOR NO KEY UPDATE).
A shared lock lets other readers share it and makes a writer of those rows wait for the holder's commit (and
the holder for a writer's): what a decision takes on the rows whose change must not interleave with it."""

from __future__ import annotations

from typing import Any

from django.db import connections
from django.db.models import QuerySet


def for_share(rows: QuerySet) -> list[Any]:
    """Lock the rows `rows` picks FOR SHARE, to the end of the current transaction (PostgreSQL), and return
    their primary keys in the queryset's order. Waits for a writer holding any of them."""
    sql, params = rows.values("pk").query.sql_with_params()
    with connections[rows.db].cursor() as cursor:
        cursor.execute(f"{sql} FOR SHARE", params)
        return [pk for (pk,) in cursor.fetchall()]
