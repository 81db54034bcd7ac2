"""A drainer that waits for a free drain slot (agents_app.wake_drainers.Drainers._slot_free) while every slot
is busy: it asks to be told of the next `give` once, not once more every half second. Before, each of its
0.5 s waits added a callback to `slots._given`, kept until a slot was given: a process whose slots stayed
busy (long turns, a drain stuck) grew the list by two callbacks, each holding a future and its loop, a
second, 7,200 an hour."""

from __future__ import annotations

import asyncio
import threading

from agents_app import wake_drainers


def _drainers(limit: int) -> wake_drainers.Drainers:
    """The slot wait's state only (no Redis, no threads)."""
    drainers = wake_drainers.Drainers.__new__(wake_drainers.Drainers)
    drainers._limit, drainers._stopped = limit, threading.Event()
    return drainers


def test_a_drainer_waiting_for_a_slot_is_told_of_the_next_give_once(monkeypatch):
    slots = wake_drainers.Slots()
    monkeypatch.setattr(wake_drainers, "slots", slots)
    drainers = _drainers(1)
    slots.take()  # every slot busy

    async def wait() -> tuple[int, bool]:
        free = asyncio.ensure_future(drainers._slot_free())
        await asyncio.sleep(2.2)  # four of its half-second waits
        waiting = len(slots._given)
        threading.Thread(target=slots.give).start()  # a drain ends, on its own thread
        return waiting, await asyncio.wait_for(free, 5)

    waiting, free = asyncio.run(wait())
    assert (waiting, free) == (1, True)
    assert slots._given == [] and slots.busy == 0


def test_a_stopping_drainer_stops_waiting(monkeypatch):
    slots = wake_drainers.Slots()
    monkeypatch.setattr(wake_drainers, "slots", slots)
    drainers = _drainers(1)
    slots.take()

    async def wait() -> bool:
        free = asyncio.ensure_future(drainers._slot_free())
        await asyncio.sleep(0.1)
        drainers._stopped.set()
        return await asyncio.wait_for(free, 5)

    assert asyncio.run(wait()) is False
