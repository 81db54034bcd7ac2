"""The session service contract and the Django-only cases again, on PostgreSQL (jsonb, real row
locks). Only our backend runs here: the in-memory one already ran in the unit phase."""

from __future__ import annotations

import pytest

from tests.agents_app.test_session_service import *  # noqa: F403
from tests.agents_app.test_session_service_django import *  # noqa: F403
from tests.agents_app.test_session_service_django import pytestmark  # noqa: F401  (django_db(transaction=True))
from tests.agents_app.test_session_store_paths import *  # noqa: F403


@pytest.fixture(params=[p for p in BACKENDS if getattr(p, "values", None) == ("django",)])  # noqa: F405
def backend(request: pytest.FixtureRequest) -> str:
    """Only the Django backend."""
    return request.param
