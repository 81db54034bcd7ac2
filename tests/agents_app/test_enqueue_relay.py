"""agents_app.broker.relay_owe: an enqueue the broker refused is sent again by the relay thread until it
goes through. A session stays owed until a send made after its last refusal went through: a refusal
recorded while the relay sends its session (a turn committed after that send's wake-up left may find
the drain it woke done already) is sent again. A refusal recorded as the relay stops (nothing owed a
moment ago) gets a relay."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from agents_app import broker


@pytest.fixture
def relay(settings: Any) -> Iterator[list[int]]:
    """Retries every 10 ms; the sessions sent, in order; nothing owed and no relay left at the end."""
    settings.ADKWEB_ENQUEUE_RETRY_SECONDS = 0.01
    sent: list[int] = []
    yield sent
    with broker._lock:
        broker._owed.clear()
    if broker._relay is not None:
        broker._relay.join(2)


def test_a_refusal_recorded_while_its_session_is_sent_is_sent_again(relay: list[int]) -> None:
    done = threading.Event()

    def send(session_pk: int) -> None:
        relay.append(session_pk)
        if len(relay) == 1:  # another turn's enqueue for this session refused meanwhile
            broker.relay_owe(session_pk, send)
        else:
            done.set()

    broker.relay_owe(7, send)
    assert done.wait(2), f"sent {relay}: the later refusal was dropped with the earlier one's send"
    assert relay == [7, 7]


def test_a_refusal_recorded_as_the_relay_stops_gets_a_relay(relay: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    deliver = broker._deliver
    done = threading.Event()
    late: list[int] = []

    def stopping(every: float, send: Any) -> None:
        deliver(every, send)  # nothing owed: the relay stops...
        if not late:  # ... and a refusal is recorded before its thread has ended
            late.append(8)
            broker.relay_owe(8, send)

    def send(session_pk: int) -> None:
        relay.append(session_pk)
        if session_pk == 8:
            done.set()

    monkeypatch.setattr(broker, "_deliver", stopping)
    broker.relay_owe(5, send)
    assert done.wait(2), f"sent {relay}: the refusal recorded as the relay stopped had no relay"
    assert relay == [5, 8]
