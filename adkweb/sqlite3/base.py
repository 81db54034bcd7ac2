"""Django's SQLite backend, with the writers of one process queued on a lock of the process.

SQLite lets one connection write at a time. A connection that finds the file locked does not wait
to be told it is free: SQLite's busy handler sleeps and tries again (1, 2, 5, 10, 15, 20, 25 ms...,
up to the `timeout`). In embedded mode every writer is a thread of one process (requests, the turn's
database thread, the notification fan-out), so a turn's append that starts while the fan-out holds
the file slept through those steps, often long after the fan-out had committed (bench/README.md,
"Phase 8, embedded mode": 26 ms per flow in `BEGIN IMMEDIATE`).

Here a transaction (`atomic`, which begins `BEGIN IMMEDIATE` on this project's settings) first takes
the lock of its database file in this process, and gives it back when it commits, rolls back or its
connection closes: a writer waiting in this process is woken as soon as the one before it is done.
Writers in other processes (a `manage.py` command beside `make run`) still meet SQLite's busy
handler, as before. A lock not obtained within the connection's `timeout` is not waited for
longer: the transaction begins anyway and SQLite's own wait (and error) applies, as before.
In-memory databases (tests) keep Django's behaviour.

Each statement's placeholders (Django's `%s`, sqlite3's `?`) are rewritten once per distinct SQL text
(`CursorWrapper.convert_query`), not by a regular expression on every execute: 7-14 us a statement on
the embedded bench's VM, ~120 statements a seed flow (bench/README.md, phase 22 (embedded)).
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from django.db.backends.sqlite3 import base

_locks: dict[str, threading.Lock] = {}
_locks_lock = threading.Lock()


def write_lock(name: str) -> threading.Lock:
    """The process's lock for the database file `name` (one per file)."""
    with _locks_lock:
        return _locks.setdefault(str(name), threading.Lock())


KEPT_LENGTH = 4000  # longer statements (long IN lists) are rewritten each time: at most ~4 MB kept


def _qmark_each_time(query: str) -> str:
    """Django's "format" style to sqlite3's "qmark" style, as SQLiteCursorWrapper.convert_query does it."""
    return base.FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%")


_qmark = functools.lru_cache(maxsize=1024)(_qmark_each_time)


class CursorWrapper(base.SQLiteCursorWrapper):
    def convert_query(self, query: str, *, param_names: list[str] | None = None) -> str:
        if param_names is None:
            return _qmark(query) if len(query) <= KEPT_LENGTH else _qmark_each_time(query)
        return super().convert_query(query, param_names=param_names)


class DatabaseWrapper(base.DatabaseWrapper):
    _write_held: threading.Lock | None = None

    def create_cursor(self, name: str | None = None) -> Any:
        return self.connection.cursor(factory=CursorWrapper)

    def _start_transaction_under_autocommit(self) -> None:
        if self.is_in_memory_db():
            return super()._start_transaction_under_autocommit()  # type: ignore[misc]  # private: not in django-stubs
        lock = write_lock(self.settings_dict["NAME"])
        timeout = float(self.settings_dict.get("OPTIONS", {}).get("timeout", 5))
        if lock.acquire(timeout=timeout):
            self._write_held = lock
        try:
            super()._start_transaction_under_autocommit()  # type: ignore[misc]  # private: not in django-stubs
        except BaseException:
            self._write_release()
            raise

    def _write_release(self) -> None:
        lock, self._write_held = self._write_held, None
        if lock is not None:
            lock.release()

    def _commit(self) -> Any:
        try:
            return super()._commit()  # type: ignore[misc]  # private: not in django-stubs
        finally:
            self._write_release()

    def _rollback(self) -> Any:
        try:
            return super()._rollback()  # type: ignore[misc]  # private: not in django-stubs
        finally:
            self._write_release()

    def _close(self) -> Any:
        try:
            return super()._close()  # type: ignore[misc]  # private: not in django-stubs
        finally:
            self._write_release()
