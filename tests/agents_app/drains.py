"""Drains driven by tests: several at once (`drains_at_once`)."""

from __future__ import annotations

import threading

from django.db import connection

from agents_app import runner


def drains_at_once(session_pk: int, drains: int) -> list[BaseException]:
    """`drains` drains of one session started together, each on a thread (and connection) of its own;
    what they raised."""
    barrier, errors = threading.Barrier(drains), []

    def drain() -> None:
        try:
            barrier.wait()
            runner.session_turns_run(session_pk)
        except BaseException as exc:  # reported by the caller
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=drain) for _ in range(drains)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return errors
