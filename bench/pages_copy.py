"""Bulk writing for bench/pages_seed.py: COPY rows into a model's table (explicit ids, the model's
defaults), and VACUUM ANALYZE afterwards."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any


class TableWriter:
    """COPY rows (dicts by attname; missing fields take the model's default) into a model's table."""

    def __init__(self, model: Any) -> None:
        from django.db import connection, models

        self.fields = list(model._meta.concrete_fields)
        self.json = [isinstance(f, models.JSONField) for f in self.fields]
        self.defaults = [self._default(f) for f in self.fields]
        cols = ", ".join(connection.ops.quote_name(f.column) for f in self.fields)
        self.sql = f"COPY {model._meta.db_table} ({cols}) FROM STDIN"
        self.count = 0

    @staticmethod
    def _default(field: Any) -> Any:
        """The field's Python default, else its database default (COPY does not apply those), else None."""
        from django.db.models import NOT_PROVIDED

        if field.has_default():
            return field.get_default()
        db_default = getattr(field, "db_default", NOT_PROVIDED)
        if db_default is not NOT_PROVIDED:
            return getattr(db_default, "value", db_default)
        return None

    def __enter__(self) -> TableWriter:
        from django.db import connection

        self._cursor = connection.cursor()
        self._copy_cm = self._cursor.cursor.copy(self.sql)
        self._copy = self._copy_cm.__enter__()
        return self

    def write(self, row: dict) -> None:
        values = []
        for f, is_json, default in zip(self.fields, self.json, self.defaults, strict=True):
            v = row.get(f.attname, default)
            if is_json and v is not None and not isinstance(v, str):
                v = json.dumps(v)
            values.append(v)
        self._copy.write_row(values)
        self.count += 1

    def __exit__(self, *exc: object) -> None:
        self._copy_cm.__exit__(*exc)
        self._cursor.close()


def copy_rows(model: Any, rows: Iterable[dict]) -> int:
    with TableWriter(model) as w:
        for row in rows:
            w.write(row)
    return w.count


def analyze() -> None:
    """VACUUM ANALYZE outside a transaction (fresh statistics and visibility map, as autovacuum would)."""
    import psycopg
    from django.db import connection

    s = connection.settings_dict
    with psycopg.connect(
        dbname=s["NAME"], user=s["USER"], host=s["HOST"], port=s["PORT"] or 5432, autocommit=True
    ) as conn:
        conn.execute("VACUUM ANALYZE")
