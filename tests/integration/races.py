"""Racing real requests at a real server: each from its own thread and client, released together."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
from django.db import connection, transaction
from django.test import Client


def page_auth(user: Any) -> tuple[dict[str, str], dict[str, str]]:
    """Cookies and headers of a logged-in browser tab sending htmx requests."""
    c = Client()
    c.force_login(user)
    csrf = secrets.token_hex(16)  # Django accepts any 32-character secret the cookie and header agree on
    cookies = {"sessionid": c.cookies["sessionid"].value, "csrftoken": csrf}
    return cookies, {"X-CSRFToken": csrf, "HX-Request": "true"}


def post_at_once(base_url: str, requests: list[dict]) -> list[tuple[str, int, str]]:
    """POST every request at once: each is httpx's `post` keyword arguments (url, json or data, headers)
    plus a `label` and, for a browser tab, its `cookies`; its thread waits at a barrier with the others
    before sending. Answers (label, status, body), in the order they came back."""
    results: list[tuple[str, int, str]] = []
    barrier = threading.Barrier(len(requests))

    def send(request: dict) -> None:
        request = dict(request)
        label = request.pop("label")
        with httpx.Client(base_url=base_url, timeout=120, cookies=request.pop("cookies", None)) as client:
            barrier.wait()
            r = client.post(**request)
        results.append((label, r.status_code, r.text))

    threads = [threading.Thread(target=send, args=(r,)) for r in requests]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def waiting_on_a_lock() -> bool:
    """Whether another connection to the test database waits on a lock (a row's, for a race's interleaving)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid() "
            "AND datname = current_database()"
        )
        return cursor.fetchone()[0] > 0


def held_then(first: Callable[[], Any], second: Callable[[], Any], wait: float = 1) -> dict[str, Any]:
    """Run `first` in a transaction held open in one thread, then `second` in another; once `second`
    waits on a lock (or after `wait` seconds), `first` commits. What each returned or raised, and whether
    `second` was seen waiting on a lock."""
    done: dict[str, Any] = {}
    began, release = threading.Event(), threading.Event()

    def one() -> None:
        try:
            with transaction.atomic():
                done["first"] = first()
                began.set()
                release.wait(10)
        except Exception as exc:  # reported by the test
            done["first"] = exc
        finally:
            began.set()
            connection.close()

    def two() -> None:
        try:
            done["second"] = second()
        except Exception as exc:  # a refusal is an answer the person sees
            done["second"] = exc
        finally:
            connection.close()

    t1 = threading.Thread(target=one)
    t1.start()
    assert began.wait(10)
    t2 = threading.Thread(target=two)
    t2.start()
    deadline = time.monotonic() + wait
    done["waited"] = False
    while time.monotonic() < deadline and not done["waited"]:
        done["waited"] = waiting_on_a_lock()
        time.sleep(0.01)
    release.set()
    t1.join(10)
    t2.join(10)
    return done


def at_once(calls: dict[Any, Callable[[], Any]]) -> dict[Any, Any]:
    """Each call from its own thread and connection, released together: what each returned or raised."""
    barrier = threading.Barrier(len(calls))
    done: dict[Any, Any] = {}

    def run(key: Any, fn: Callable[[], Any]) -> None:
        try:
            barrier.wait(10)
            done[key] = fn()
        except Exception as exc:  # the caller asserts on it
            done[key] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=item) for item in calls.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return done
