"""The session service contract, the Django-only cases and the ticket hook's, again on PostgreSQL
(jsonb, real row locks, the one-statement append). Only our backend runs here: the in-memory one
already ran in the unit phase."""

from __future__ import annotations

import pytest

from tests.agents_app.test_session_service import *  # noqa: F403
from tests.agents_app.test_session_service_django import *  # noqa: F403
from tests.agents_app.test_session_service_django import pytestmark  # noqa: F401  (django_db(transaction=True))
from tests.agents_app.test_session_store_paths import *  # noqa: F403
from tests.approvals.test_ticket_hook import *  # noqa: F403  (the one-statement append is PostgreSQL's)


@pytest.fixture(params=[p for p in BACKENDS if getattr(p, "values", None) == ("django",)])  # noqa: F405
def backend(request: pytest.FixtureRequest) -> str:
    """Only the Django backend."""
    return request.param
