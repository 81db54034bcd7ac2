"""Shared parts of the remote-app tests: a RemoteApp on a real `adk api_server`, its events there,
and waits on the turns here."""

from __future__ import annotations

import time
from typing import Any

import httpx
from django.test import Client

from agents_app import services
from agents_app.models import RemoteApp, StoredEvent, Turn
from tests.adk_api_server import AdkApiServer

SECRET = "Bearer remote-s3cret-9f8e7d6c5b4a"


def remote_app(server: AdkApiServer | str, app: str = "cmp_reimburse", name: str = "", **fields: Any) -> RemoteApp:
    url = server if isinstance(server, str) else server.url
    return RemoteApp.objects.create(
        name=name or f"remote_{app.removeprefix('cmp_')}",
        base_url=url,
        remote_app_name=app,
        auth_header_value=SECRET,
        description=f"{app} on another ADK server",
        **fields,
    )


def remote_events(server: AdkApiServer | str, remote: RemoteApp, session: Any) -> list[dict]:
    """The remote server's own copy of the session (what its agent has seen)."""
    url = server if isinstance(server, str) else server.url
    r = httpx.get(f"{url}/apps/{remote.remote_app_name}/users/{session.user_id}/sessions/{session.session_id}")
    assert r.status_code == 200, r.text
    return r.json()["events"]


def start(remote: RemoteApp, text: str, demo: dict) -> Any:
    session = services.session_create(app_name=remote.name, user_id="requester")
    services.message_send(session=session, text=text, actor=demo["requester"])
    return session


def user_texts(events: list[dict]) -> list[str]:
    return [p["text"] for e in events if e["author"] == "user" for p in e["content"]["parts"] if "text" in p]


def assert_mirrored(server: Any, remote: RemoteApp, session: Any) -> None:
    """Every event the remote agent produced is stored here once, with its id, in the remote's order;
    the user's events are stored once each, with the remote's invocation ids."""
    theirs = remote_events(server, remote, session)
    ours = list(StoredEvent.objects.filter(session=session).order_by("id").values_list("author", "event_id", "data"))
    assert [e["id"] for e in theirs if e["author"] != "user"] == [i for a, i, _ in ours if a != "user"]
    their_users = [(e["invocationId"], e.get("content")) for e in theirs if e["author"] == "user"]
    our_users = [(d["invocation_id"], d.get("content")) for a, _, d in ours if a == "user"]
    assert [i for i, _ in our_users] == [i for i, _ in their_users]
    assert len({i for _, i, _ in ours}) == len(ours)


def _page(user: Any, session: Any) -> str:
    client = Client()
    client.force_login(user)
    r = client.get(f"/sessions/{session.pk}/")
    assert r.status_code == 200
    return r.content.decode()


def _wait_turns(session: Any, wait: Any, timeout: float = 30) -> list[Turn]:
    wait(
        lambda: not Turn.objects.filter(session=session, status__in=["queued", "running"]).exists(),
        timeout=timeout,
        what="the session's turns",
    )
    return list(Turn.objects.filter(session=session).order_by("id"))


__all__ = ["time"]


def _retry(user: Any, session: Any, turn: Turn) -> None:
    client = Client()
    client.force_login(user)
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert ">Retry</button>" in page
    r = client.post(f"/sessions/{session.pk}/turns/{turn.pk}/retry/", HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and "Retrying" in r.content.decode()


def _closed_port() -> int:
    from tests.adk_api_server import _free_port

    return _free_port()
