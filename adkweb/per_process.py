"""One object per process, made on first use: a thread pool, a keeper thread, a client with sockets.

A forked child (a prefork Celery worker, a test's subprocess) inherits its parent's objects but not
their threads, and must not share their sockets: it gets an object of its own the first time it asks.
The lock is made again in the child too, so a fork taken while another thread held it cannot leave
the child waiting for a thread it does not have.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

_every: weakref.WeakSet[PerProcess] = weakref.WeakSet()


class PerProcess(Generic[T]):
    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._lock = threading.Lock()
        self._held: tuple[int, T] | None = None
        _every.add(self)

    def get(self) -> T:
        """This process's object, made now if this process has none yet."""
        held = self._held
        pid = os.getpid()
        if held is None or held[0] != pid:
            with self._lock:
                held = self._held
                if held is None or held[0] != pid:
                    held = self._held = (pid, self._make())
        return held[1]

    def made(self) -> T | None:
        """This process's object if it has made one (None: nothing to stop or count)."""
        held = self._held
        return held[1] if held is not None and held[0] == os.getpid() else None

    def swap(self, value: T | None) -> T | None:
        """Put `value` in place of this process's object (None: make one on next use); returns the one
        it replaces (tests: a client that cannot connect)."""
        with self._lock:
            old = self.made()
            self._held = None if value is None else (os.getpid(), value)
        return old


def _after_fork_in_child() -> None:
    for each in list(_every):
        each._lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
