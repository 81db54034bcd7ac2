"""adkweb.sqlite3: a statement's placeholders rewritten for sqlite3 once per distinct SQL text (not by a
regular expression on every execute), as Django's SQLite cursor rewrites them: `%s` to `?`, `%%` to
`%`, an escaped `%%s` left a literal `%s`; named parameters (a dict) as Django passes them."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.backends.sqlite3 import base as django_sqlite

from adkweb.sqlite3 import base

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's backend"),
]


def test_the_statements_run_as_djangos_cursor_runs_them():
    with connection.cursor() as cursor:
        assert isinstance(cursor.cursor, base.CursorWrapper)
        cursor.execute("SELECT %s, '100%%', '%%s', %s || '%%'", [1, "a"])
        assert cursor.fetchone() == (1, "100%", "%s", "a%")
        cursor.execute("SELECT %(first)s, %(second)s", {"first": 2, "second": "b"})
        assert cursor.fetchone() == (2, "b")
        cursor.execute("CREATE TEMP TABLE placeholders_t (v text)")
        cursor.executemany("INSERT INTO placeholders_t VALUES (%s || '%%')", [["x"], ["y"]])
        cursor.execute("SELECT v FROM placeholders_t ORDER BY v")
        assert cursor.fetchall() == [("x%",), ("y%",)]
    queries = ["SELECT %s, '100%%' WHERE %s", "SELECT '%%s', %s", "SELECT 1"]
    for query in queries:
        assert base._qmark(query) == django_sqlite.FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%")


def test_a_statement_is_rewritten_once(monkeypatch):
    real = django_sqlite.FORMAT_QMARK_REGEX
    seen: list[str] = []

    class Counted:
        def sub(self, repl: str, query: str) -> str:
            seen.append(query)
            return real.sub(repl, query)

    base._qmark.cache_clear()
    monkeypatch.setattr(django_sqlite, "FORMAT_QMARK_REGEX", Counted())
    for n in range(3):
        with connection.cursor() as cursor:
            cursor.execute("SELECT %s + 40 -- once", [n])
            assert cursor.fetchone() == (n + 40,)
    assert seen == ["SELECT %s + 40 -- once"]
