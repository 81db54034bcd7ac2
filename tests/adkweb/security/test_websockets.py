"""Every websocket route refuses anonymous and unauthorised users and pushes them nothing."""

from __future__ import annotations

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser

from tests.adkweb.security.sweep import MISSING, ROLES, SECRET_ARG, SESSION_ID, World


def ws_routes(world: World) -> list[tuple[str, str, dict[str, bool]]]:
    """(label, path, role -> may connect). Every route of adkweb/routing.py is here."""
    s, t = world.session, world.call
    return [
        (
            "conversation list",
            "/ws/sessions/",
            dict(anonymous=False, requester=True, mallory=True, observer=True, approver=True),
        ),
        (
            "conversation",
            f"/ws/sessions/{s.pk}/",
            dict(anonymous=False, requester=True, mallory=False, observer=True, approver=True),
        ),
        (
            "missing conversation",
            f"/ws/sessions/{MISSING}/",
            dict(anonymous=False, requester=False, mallory=False, observer=False, approver=False),
        ),
        (
            "approvals inbox",
            "/ws/approvals/",
            dict(anonymous=False, requester=False, mallory=False, observer=False, approver=True),
        ),
        (
            "approvals nav count",
            "/ws/approvals/?nav=1",
            dict(anonymous=False, requester=False, mallory=False, observer=False, approver=True),
        ),
        (
            "ticket",
            f"/ws/tickets/{t.pk}/",
            dict(anonymous=False, requester=True, mallory=False, observer=True, approver=True),
        ),
        (
            "missing ticket",
            f"/ws/tickets/{MISSING}/",
            dict(anonymous=False, requester=False, mallory=False, observer=False, approver=False),
        ),
    ]


def test_every_websocket_route_is_in_the_table(world):
    from adkweb.routing import websocket_urlpatterns

    routes = {str(p.pattern) for p in websocket_urlpatterns}
    covered = {"ws/sessions/", "ws/sessions/<int:pk>/", "ws/approvals/", "ws/tickets/<int:ticket_id>/"}
    assert routes <= covered, f"websocket routes not in the sweep: {sorted(routes - covered)}"


@pytest.mark.django_db(transaction=True)
async def test_websocket_routes_refuse_anonymous_and_unauthorised_users(world):
    from adkweb.asgi import application

    failures = []
    for label, path, allowed in ws_routes(world):
        for role in ROLES:
            comm = WebsocketCommunicator(application, path, headers=[(b"origin", b"http://testserver")])
            comm.scope["user"] = world.users[role] or AnonymousUser()
            connected, _ = await comm.connect()
            if connected:
                frames = []
                while not await comm.receive_nothing(timeout=0.05):
                    frames.append(await comm.receive_from())
                text = "".join(frames)
                if role in ("anonymous", "mallory") and (SESSION_ID in text or SECRET_ARG in text):
                    failures.append(f"{path} ({label}) as {role}: the socket pushed requester's content")
                await comm.disconnect()
            if connected != allowed[role]:
                failures.append(f"{path} ({label}) as {role}: connected={connected}, expected {allowed[role]}")
    assert not failures, "\n".join(failures)


@pytest.mark.django_db(transaction=True)
async def test_anonymous_sockets_are_refused_through_the_real_stack_without_scope_user(world):
    """No scope["user"] injected: the cookie-less real stack (AuthMiddlewareStack) must refuse."""
    from adkweb.asgi import application

    for _, path, _ in ws_routes(world):
        comm = WebsocketCommunicator(application, path, headers=[(b"origin", b"http://testserver")])
        connected, _ = await comm.connect()
        assert not connected, f"{path}: an anonymous socket connected"


@pytest.mark.django_db(transaction=True)
async def test_mallory_on_the_list_socket_gets_no_row_for_the_requesters_session(world):
    from channels.layers import get_channel_layer

    from adkweb.asgi import application
    from agents_app.events import SESSIONS_GROUP

    comm = WebsocketCommunicator(application, "/ws/sessions/", headers=[(b"origin", b"http://testserver")])
    comm.scope["user"] = world.users["mallory"]
    assert (await comm.connect())[0]
    await get_channel_layer().group_send(SESSIONS_GROUP, {"type": "session.status", "session_pk": world.session.pk})
    assert await comm.receive_nothing(timeout=0.3), "mallory's list socket got a row of the requester's session"
    await comm.disconnect()
