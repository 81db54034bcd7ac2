"""The ASGI entry point leaves what the process made to start out of the cyclic collector's walks
(`gc.freeze`): a full collection in a web process with 1,000 websockets took 200-390 ms of its
event loop, most of it walking Django's, the apps' and ADK's objects (bench/README.md)."""

from __future__ import annotations

import gc


def test_the_objects_made_at_startup_are_frozen():
    import adkweb.asgi  # noqa: F401

    assert gc.get_freeze_count() > 50_000
