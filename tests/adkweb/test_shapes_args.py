"""adkweb.shapes with arguments its kept shape was not made for: the ORM's answer, not a driver's error. A
shape is kept from its first call's arguments; a later call with an int past a bigint (10**400, 2**63), a
bool where an int was, or a str where an int was, had its argument put in the kept parameters as it is:
SQLite's driver raised OverflowError (PostgreSQL: a bigint compared with a boolean, an error), a 500 for
whatever request reached it. Today's callers check their numbers first (adkweb.http.number); the shapes
guard their own input."""

from __future__ import annotations

import pytest

from adkweb import shapes
from agents_app.models import AdkSession

pytestmark = pytest.mark.django_db


def _by_pk(pk: object):  # noqa: ANN202 - a queryset
    return AdkSession.all_objects.filter(pk=pk).values("pk")


@pytest.mark.parametrize(
    "odd", [10**400, 2**63, -(2**63) - 1, True, "1", 1.0], ids=["10**400", "2**63", "-2**63-1", "True", "str", "float"]
)
def test_a_kept_shape_called_with_an_argument_it_was_not_made_for_answers_as_the_orm(odd):
    session = AdkSession.all_objects.create(
        app_name="a", user_id="u", session_id="s", state={}, create_time=0, update_time=0
    )
    key = ("test_shapes_args", type(odd).__name__)
    assert shapes.count("test_shapes_args", key, _by_pk, session.pk) == 1  # the shape kept, for an int
    try:
        expected: object = _by_pk(odd).count()
    except (ValueError, TypeError, OverflowError) as exc:  # the ORM's own refusal, if it has one
        expected = type(exc)
    try:
        got: object = shapes.count("test_shapes_args", key, _by_pk, odd)
    except (ValueError, TypeError, OverflowError) as exc:
        got = type(exc)
    assert got == expected
