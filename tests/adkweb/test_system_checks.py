"""`make run`'s first command (migrate) runs Django's system checks: on the embedded default (SQLite) they
print nothing a newcomer should act on."""

from __future__ import annotations

import pytest
from django.core import checks
from django.db import connection


@pytest.mark.django_db
def test_the_system_checks_are_clean_on_sqlite():
    if connection.vendor != "sqlite":
        pytest.skip("the embedded default's database")
    found = checks.run_checks(databases=["default"])
    assert [f"{m.id}: {m.msg}" for m in found if m.level >= checks.WARNING and not m.is_silenced()] == []
