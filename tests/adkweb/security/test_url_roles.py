"""Every URL × every role × each method: the table's expectations, nothing leaked, nothing changed by a refusal."""

from __future__ import annotations

import pytest

from tests.adkweb.security.sweep import ROLES, World, _check, url_pattern_names
from tests.adkweb.security.tables import targets


def test_every_url_is_in_the_table(world):
    covered = {t.name for t in targets(world)}
    missing = url_pattern_names() - covered
    assert not missing, f"URL patterns with no row in the security sweep table: {sorted(missing)}"


def _labels() -> list[str]:
    """Row labels for test ids (computed with placeholder objects: labels do not depend on them)."""
    from types import SimpleNamespace

    fake = SimpleNamespace(pk=0, call_id="", call_name="")
    return [t.label for t in targets(World(users={}, session=fake, call=fake, failed_turn=fake))]  # type: ignore[arg-type]


@pytest.mark.parametrize("label", _labels())
def test_url_role_sweep(world, label):
    """One row: every method of the row × every role, each cell checked and rolled back."""
    target = next(t for t in targets(world) if t.label == label)
    failures: list[str] = []
    for method in target.expect:
        for role in ROLES:
            _check(world, target, role, method, failures)
    assert not failures, "\n".join(failures)
