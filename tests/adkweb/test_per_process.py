"""adkweb.per_process: one object per process, a forked child's own, even when the parent forked
while another thread was making one."""

from __future__ import annotations

import os
import threading

from adkweb.per_process import PerProcess


def _in_child(check) -> int:
    """Run `check()` in a forked child; its exit status (0: it returned True in time)."""
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 1
        try:
            done = threading.Event()
            ok: list[bool] = []
            threading.Thread(target=lambda: (ok.append(bool(check())), done.set()), daemon=True).start()
            code = 0 if done.wait(5) and ok == [True] else 1
        finally:
            os._exit(code)
    return os.waitpid(pid, 0)[1]


def test_one_object_per_process_and_a_new_one_in_a_forked_child():
    made: list[int] = []
    one = PerProcess(lambda: made.append(os.getpid()) or object())
    assert one.made() is None
    first = one.get()
    assert one.get() is first and one.made() is first and made == [os.getpid()]
    # The child inherits `first` but gets its own (the parent's threads and sockets are not its own).
    assert _in_child(lambda: one.made() is None and one.get() is not first and one.get() is one.get()) == 0
    assert one.get() is first  # the parent's is untouched


def test_a_child_forked_while_another_thread_was_making_one_does_not_hang():
    started, release = threading.Event(), threading.Event()

    def slow() -> object:
        started.set()
        release.wait(5)
        return object()

    one: PerProcess[object] = PerProcess(slow)
    maker = threading.Thread(target=one.get)
    maker.start()
    assert started.wait(5)  # the lock is held by `maker` now
    try:
        release_in_child = lambda: (release.set(), one.get())[1] is not None  # noqa: E731
        assert _in_child(release_in_child) == 0
    finally:
        release.set()
        maker.join(5)


def test_swap_puts_another_in_place_and_none_makes_a_new_one_next():
    one = PerProcess(object)
    first = one.get()
    stand_in = object()
    assert one.swap(stand_in) is first and one.get() is stand_in
    assert one.swap(None) is stand_in and one.get() not in (first, stand_in)
