"""agents_app.wake.key: the wake-up list of the drain task's queue, as Celery routes it, routed once per
process for the web's pushes (Celery's routing and settings' lookup cost ~50 µs after an idle gap, on
a new turn's wake-up path)."""

from __future__ import annotations

from typing import Any

import pytest

from adkweb.celery import app
from agents_app import wake


def test_the_processs_list_is_routed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wake, "_key", [], raising=False)
    router, asked = app.amqp.router, []
    real = router.route

    def route(*args: Any, **kwargs: Any) -> Any:
        asked.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(router, "route", route)
    names = {wake.key() for _ in range(3)}
    assert names == {wake.KEY_PREFIX + real({}, wake.SESSION_DRAIN_TASK)["queue"].name}
    assert len(asked) == 1
