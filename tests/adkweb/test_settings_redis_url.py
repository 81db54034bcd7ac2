"""A REDIS_URL whose query makes redis-py's clients encode or decode otherwise than adkweb's own Redis wire
(adkweb.settings_mode.redis_url_refusal) stops the process at startup with what to change. Before: it
started; with ?encoding=utf-16 every wake-up a web process pushed (agents_app.wake, redis-py's client) went to
a key whose bytes are not the one the worker pops (its own wire: UTF-8), so each turn waited for the sweeper;
with ?decode_responses=true the drainers got text where they read bytes."""

from __future__ import annotations

import sys

import pytest
import redis

from .test_production_settings import KEY, _run

URL = "redis://127.0.0.1:1/0"


@pytest.mark.parametrize(
    "query", ["encoding=latin-1", "encoding=utf-16", "encoding=cp500", "encoding=nope", "decode_responses=true"]
)
def test_a_redis_url_asking_for_another_encoding_stops_the_process_saying_what_to_change(query):
    done = _run([sys.executable, "manage.py", "check"], REDIS_URL=f"{URL}?{query}", DJANGO_SECRET_KEY=KEY)
    assert done.returncode != 0 and "ImproperlyConfigured: REDIS_URL asks for " + query in done.stderr, done.stderr
    assert "Remove ?" + query.split("=")[0] + "= from REDIS_URL" in done.stderr


@pytest.mark.parametrize(
    "query",
    ["", "?encoding=utf-8", "?encoding=UTF8", "?decode_responses=false", "?socket_timeout=3&health_check_interval=5"],
)
def test_utf8_and_other_options_are_taken(query):
    from adkweb.settings_mode import redis_url_refusal

    assert redis_url_refusal(URL + query) == ""


def test_what_another_encoding_did_its_wake_up_key_is_not_the_workers():
    """The evidence for the refusal: redis-py's client with ?encoding=utf-16 writes another key's bytes."""
    assert redis.Redis.from_url(f"{URL}?encoding=utf-16").get_encoder().encode("adkweb:wake:agents") != (
        b"adkweb:wake:agents"
    )
