"""Fixtures of the inbox's tests (paging, typed pages, "mine") and of the JSON APIs' (`api`)."""

from __future__ import annotations

import pytest
from django.test import Client


@pytest.fixture
def approver(client: Client, demo) -> Client:
    """A client logged in as the demo approver."""
    client.force_login(demo["approver"])
    return client


@pytest.fixture
def api(demo):
    """A client logged in as a given person: `api(demo["approver"])` (the JSON APIs' tests)."""

    def as_(user) -> Client:
        client = Client()
        client.force_login(user)
        return client

    return as_
