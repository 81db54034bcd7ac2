"""adkweb.sqlite3: the SQLite writers of one process queue on a lock of the process, not on SQLite's
busy handler (which sleeps and retries). Two connections of their own to a file database in a
temporary folder, each in a thread, as the embedded server's request, turn and task threads are."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from django.db import OperationalError, connections, transaction

from adkweb.sqlite3.base import DatabaseWrapper, write_lock


def _wrapper(name: Path, alias: str, timeout: float) -> DatabaseWrapper:
    """A connection of this thread's own, reachable as `connections[alias]` (for transaction.atomic)."""
    settings_dict: dict[str, Any] = {
        "ENGINE": "adkweb.sqlite3",
        "NAME": str(name),
        "OPTIONS": {"timeout": timeout, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL"},
        "ATOMIC_REQUESTS": False,
        "AUTOCOMMIT": True,
        "CONN_MAX_AGE": None,
        "CONN_HEALTH_CHECKS": False,
        "TIME_ZONE": None,
        "USER": "",
        "PASSWORD": "",
        "HOST": "",
        "PORT": "",
        "TEST": {},
    }
    conn = DatabaseWrapper(settings_dict, alias=alias)
    connections[alias] = conn  # thread-local, as Django's own connections are
    return conn


def _no_busy_wait(conn: DatabaseWrapper) -> None:
    """SQLite's own wait off: a BEGIN IMMEDIATE that finds the file locked fails at once."""
    conn.ensure_connection()
    conn.connection.execute("PRAGMA busy_timeout = 0")


@pytest.fixture(autouse=True)
def _own_connections(django_db_blocker: Any) -> Any:
    """These tests open connections of their own (not the test database's)."""
    with django_db_blocker.unblock():
        yield


@pytest.fixture
def db_file(tmp_path: Path) -> Path:
    name = tmp_path / "lock.sqlite3"
    conn = _wrapper(name, "setup", 5)
    with conn.cursor() as cursor:
        cursor.execute("CREATE TABLE t (who TEXT)")
    conn.close()
    return name


def _in_thread(target: Any) -> dict[str, Any]:
    done: dict[str, Any] = {}

    def run() -> None:
        try:
            done["result"] = target()
        except BaseException as exc:  # noqa: BLE001  (reported to the test)
            done["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    done["thread"] = thread
    return done


def test_a_second_writer_waits_for_the_first_to_commit_without_sqlites_busy_handler(db_file: Path) -> None:
    """With SQLite's busy wait off, a transaction begun while another thread's is open still goes
    through: it waited on the process's lock, and began once the first had committed."""
    first_in, first_may_commit = threading.Event(), threading.Event()
    order: list[str] = []

    def first() -> None:
        conn = _wrapper(db_file, "first", 5)
        _no_busy_wait(conn)
        with transaction.atomic(using=conn.alias):
            conn.cursor().execute("INSERT INTO t VALUES ('first')")
            first_in.set()
            first_may_commit.wait(5)
            order.append("first commits")
        conn.close()

    def second() -> None:
        conn = _wrapper(db_file, "second", 5)
        _no_busy_wait(conn)
        first_in.wait(5)
        with transaction.atomic(using=conn.alias):
            order.append("second began")
            conn.cursor().execute("INSERT INTO t VALUES ('second')")
        conn.close()

    a = _in_thread(first)
    assert first_in.wait(5)
    b = _in_thread(second)
    b["thread"].join(0.3)  # the second is waiting (without the lock: it has failed already)
    first_may_commit.set()
    for done in (a, b):
        done["thread"].join(10)
        assert "error" not in done, done.get("error")
    assert order == ["first commits", "second began"]
    check = _wrapper(db_file, "check", 5)
    with check.cursor() as cursor:
        cursor.execute("SELECT who FROM t ORDER BY rowid")
        assert [row[0] for row in cursor.fetchall()] == ["first", "second"]
    check.close()


@pytest.mark.parametrize("how", ["commit", "rollback", "close", "failed begin"])
def test_the_lock_is_given_back_however_the_transaction_ends(db_file: Path, how: str) -> None:
    lock = write_lock(str(db_file))

    def run() -> None:
        conn = _wrapper(db_file, "ends", 5)
        conn.ensure_connection()
        if how == "failed begin":
            other = _wrapper(db_file, "holder", 5)
            _no_busy_wait(other)
            other.connection.execute("BEGIN IMMEDIATE")  # SQLite's lock, outside this process's lock
            conn.connection.execute("PRAGMA busy_timeout = 0")
            with pytest.raises(OperationalError):
                with transaction.atomic(using=conn.alias):
                    pass
            other.connection.execute("ROLLBACK")
            other.close()
            return
        try:
            with transaction.atomic(using=conn.alias):
                conn.cursor().execute("INSERT INTO t VALUES ('x')")
                assert lock.locked()
                if how == "rollback":
                    raise RuntimeError("undo")
                if how == "close":
                    conn.close()
        except RuntimeError:
            pass
        except Exception:
            if how != "close":
                raise

    done = _in_thread(run)
    done["thread"].join(10)
    assert "error" not in done, done.get("error")
    assert not lock.locked()


def test_a_lock_not_obtained_in_time_leaves_the_wait_to_sqlite(db_file: Path) -> None:
    """A lock held past the connection's timeout (by something that never gives it back) delays
    a transaction by that timeout, never for good."""
    lock = write_lock(str(db_file))
    assert lock.acquire(timeout=1)
    try:

        def write() -> None:
            conn = _wrapper(db_file, "late", 0.2)
            with transaction.atomic(using=conn.alias):
                conn.cursor().execute("INSERT INTO t VALUES ('late')")
            conn.close()

        done = _in_thread(write)
        done["thread"].join(10)
        assert not done["thread"].is_alive()
        assert "error" not in done, done.get("error")
    finally:
        lock.release()


def test_the_embedded_settings_use_it() -> None:
    if connections["default"].vendor != "sqlite":
        pytest.skip("the test database is PostgreSQL")
    assert isinstance(connections["default"], DatabaseWrapper)
