"""The world every security-sweep test starts from, and quiet request logs."""

import logging

import pytest

from tests.adkweb.security.sweep import World, world_create


@pytest.fixture(autouse=True)
def _quiet_request_logs():
    """Django logs every 4xx ("Not Found: ..."); hundreds of them hide real failures."""
    logger = logging.getLogger("django.request")
    level = logger.level
    logger.setLevel(logging.ERROR)  # 5xx still logged
    yield
    logger.setLevel(level)


@pytest.fixture
def world(demo) -> World:
    return world_create(demo)
