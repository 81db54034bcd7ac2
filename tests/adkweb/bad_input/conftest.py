"""Fixtures of the bad-input sweep."""

import logging

import pytest

from tests.adkweb.bad_input.sweep import Objs, objs_create


@pytest.fixture(autouse=True)
def _quiet_request_logs():
    logger = logging.getLogger("django.request")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


@pytest.fixture
def objs(demo) -> Objs:
    return objs_create(demo)
