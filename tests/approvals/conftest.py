"""Fixtures of the inbox's tests (paging, typed pages, "mine")."""

from __future__ import annotations

import pytest
from django.test import Client


@pytest.fixture
def approver(client: Client, demo) -> Client:
    """A client logged in as the demo approver."""
    client.force_login(demo["approver"])
    return client
