"""Live updates across processes: the `celery worker` subprocess stores events and opens tickets,
publishes them through the Redis channel layer, and websocket consumers in this process (the web
side) push the rendered HTML a user sees. The two sides only meet through PostgreSQL and Redis.

The first two tests drive the consumers with Channels' WebsocketCommunicator (this process's
Redis channel layer); the last one is a real browser-like client: a session cookie from the login
page, real websockets to a live uvicorn server."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import websockets
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.test import Client
from websockets.sync.client import connect as ws_connect

from adkweb.routing import websocket_urlpatterns
from agents_app import services
from approvals.models import PendingCall
from tests.conftest import wait_for

pytest_plugins = ["tests.conftest_live"]
pytestmark = pytest.mark.django_db(transaction=True)

app = URLRouter(websocket_urlpatterns)
MESSAGE = "Please reimburse 200$ for meals"
DONE = "Done: I reimbursed $200.00 for meals."
TIMEOUT = 30.0  # a turn in the worker process, through the Redis broker and back


@pytest.fixture
def own_layer():
    """This test's own Redis channel layer instance. channels_redis serves one event loop at a time
    per instance, and a live server's loop (another module's HTTP API runs) may still hold the shared
    one: a TurnWatch pump whose cancellation has not landed yet."""
    from channels.layers import channel_layers

    shared = channel_layers.backends.get("default")
    channel_layers.backends["default"] = channel_layers.make_backend("default")
    yield channel_layers.backends["default"]
    channel_layers.backends["default"] = shared


# -- helpers -------------------------------------------------------------------------------------


async def communicator(path: str, user: Any) -> tuple[WebsocketCommunicator, bool]:
    comm = WebsocketCommunicator(app, path)
    comm.scope["user"] = user
    connected, _ = await comm.connect()
    return comm, connected


async def receive_until(
    comm: WebsocketCommunicator, seen: Callable[[str], bool], what: str, timeout: float = TIMEOUT
) -> list[str]:
    """Collect pushed frames until `seen(all frames joined)`; fail (showing them) after `timeout`."""
    frames: list[str] = []
    deadline = time.monotonic() + timeout
    while not seen("".join(frames)):
        remaining = deadline - time.monotonic()
        try:
            if remaining <= 0:
                raise TimeoutError
            frames.append(await comm.receive_from(timeout=remaining))
        except TimeoutError:
            raise AssertionError(f"Timed out after {timeout}s waiting for {what}; received: {tail(frames)}") from None
    return frames


def ws_receive_until(ws: Any, seen: Callable[[str], bool], what: str, timeout: float = TIMEOUT) -> list[str]:
    """The same, for a real (sync) websockets connection."""
    frames: list[str] = []
    deadline = time.monotonic() + timeout
    while not seen("".join(frames)):
        remaining = deadline - time.monotonic()
        try:
            if remaining <= 0:
                raise TimeoutError
            frames.append(ws.recv(timeout=remaining))
        except TimeoutError:
            raise AssertionError(f"Timed out after {timeout}s waiting for {what}; received: {tail(frames)}") from None
    return frames


def tail(frames: list[str], chars: int = 3000) -> str:
    return f"{len(frames)} frames, ending: ...{''.join(frames)[-chars:]!r}"


def open_ticket(session_pk: int) -> PendingCall | None:
    return PendingCall.objects.filter(session_id=session_pk, status="pending").first()


def test_channel_layer_waits_longer_than_its_blocking_pop():
    """redis-py 8 times socket reads out after 5 s by default: channels_redis's blocking 5 s pop
    then raised TimeoutError and killed every websocket consumer idle for 5 s."""
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    pool = layer.create_pool(0)
    timeout = pool.connection_class(**pool.connection_kwargs).socket_timeout  # redis-py's default if unset
    assert timeout is None or timeout > layer.brpop_timeout


# -- the conversation socket ----------------------------------------------------------------------


async def test_conversation_socket_shows_the_workers_events_then_the_reimbursement(demo, worker, own_layer):
    session = await sync_to_async(services.session_create)(app_name="reimbursement_agent", user_id="requester")
    comm, connected = await communicator(f"/ws/sessions/{session.pk}/?after=0", demo["requester"])
    assert connected
    assert 'id="session-status"' in await comm.receive_from()  # the badge, sent on connect

    requester = Client()
    await sync_to_async(requester.force_login)(demo["requester"])
    r = await sync_to_async(requester.post)(
        f"/sessions/{session.pk}/messages/", {"text": MESSAGE}, HTTP_HX_REQUEST="true"
    )
    assert r.status_code == 200

    frames = await receive_until(
        comm,
        lambda html: MESSAGE in html and "waiting for a human" in html and "Result of" in html,
        "the user's message and the pending ask_for_approval call",
    )
    pushed = "".join(frames)
    assert "Waits for a human:" in pushed and "<code>ask_for_approval</code>" in pushed
    assert "purpose: meals · amount: $200.00" in pushed  # declared order, though jsonb reorders keys
    ticket = await sync_to_async(wait_for)(lambda: open_ticket(session.pk), what="the ticket")
    assert f'<a href="/tickets/{ticket.pk}/">Ticket #{ticket.pk}</a>' in pushed  # the link to answer it
    reply = next(f for f in frames if "Result of" in f)  # the tool's initial (pending) response
    assert (
        "<code>ask_for_approval</code>" in reply
        and "status: pending" in reply
        and "ticket-id: approval-ticket-" in reply
    )
    assert DONE not in pushed

    approver = Client()
    await sync_to_async(approver.force_login)(demo["approver"])
    r = await sync_to_async(approver.post)(
        f"/tickets/{ticket.pk}/approve/", {"approve-comment": "ok"}, HTTP_HX_REQUEST="true"
    )
    assert r.status_code == 200, r.content.decode()[:500]

    # The card is published by the process that decided, the resumed run's events by the worker: two
    # publishers, so either may come first (with the worker woken at once, the text often does).
    card = f'id="conv-ticket-{ticket.pk}"'
    frames = await receive_until(
        comm,
        lambda html: DONE in html and card in html and "by approver" in html,
        "the reimbursement text and the ticket's card, closed in place by the approver",
    )
    pushed = "".join(frames)
    assert "Answer from a person to" in pushed and "<code>reimburse</code>" in pushed
    await comm.disconnect()


# -- the approvals inbox socket --------------------------------------------------------------------


async def test_inbox_socket_gets_the_workers_new_ticket_and_the_nav_count(demo, worker, own_layer):
    from adkweb.asgi import application

    # Who may not listen: a requester, and anyone not logged in (through the real ASGI stack).
    _, connected = await communicator("/ws/approvals/", demo["requester"])
    assert not connected
    _, connected = await communicator("/ws/approvals/", AnonymousUser())
    assert not connected
    anonymous = WebsocketCommunicator(application, "/ws/approvals/", headers=[(b"origin", b"http://testserver")])
    assert not (await anonymous.connect())[0]

    inbox, connected = await communicator("/ws/approvals/", demo["approver"])
    assert connected
    nav, connected = await communicator("/ws/approvals/?nav=1", demo["admin"])  # any other page of an approver
    assert connected

    session = await sync_to_async(services.conversation_start)(
        app_name="reimbursement_agent", user=demo["requester"], text=MESSAGE
    )

    frames = await receive_until(
        inbox, lambda html: "meals · $200.00" in html and 'id="inbox-empty"' in html, "the new ticket's row"
    )
    ticket = await sync_to_async(PendingCall.objects.get)(session_id=session.pk)
    row = next(f for f in frames if f'id="pending-call-{ticket.pk}"' in f)
    assert row.startswith('<tbody id="inbox-rows" hx-swap-oob="afterbegin">')
    assert "reimbursement_agent" in row and "requester" in row
    # The row alone in its frame, then one frame with the counts and the line that goes with them.
    assert frames[frames.index(row) + 1] == (
        '<span id="nav-open-count" class="badge" title="open tickets" hx-swap-oob="true">1</span>'
        '<span id="inbox-total" hx-swap-oob="true">1 ticket</span>'
        '<p id="inbox-empty" hx-swap-oob="delete"></p>'
    )

    frames = await receive_until(nav, lambda html: 'hx-swap-oob="true">1</span>' in html, "the nav count")
    assert all(f.startswith('<span id="nav-open-count"') and "pending-call" not in f for f in frames)

    await inbox.disconnect()
    await nav.disconnect()


# -- real websockets to a live server ------------------------------------------------------------


def login(base_url: str, username: str, password: str) -> httpx.Client:
    """Log in through the login page, as a browser does; the client keeps the session cookie."""
    client = httpx.Client(base_url=base_url, timeout=30)
    assert client.get("/accounts/login/").status_code == 200
    r = client.post(
        "/accounts/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": client.cookies["csrftoken"]},
    )
    assert r.status_code == 302, r.text[:500]
    assert "sessionid" in client.cookies
    return client


def post(client: httpx.Client, url: str, data: dict[str, str]) -> httpx.Response:
    return client.post(url, data=data, headers={"X-CSRFToken": client.cookies["csrftoken"], "HX-Request": "true"})


def open_socket(server: Any, path: str, client: httpx.Client) -> Any:
    cookie = "; ".join(f"{name}={value}" for name, value in client.cookies.items())
    return ws_connect(server.ws_url + path, origin=server.url, additional_headers={"Cookie": cookie}, open_timeout=10)


def test_real_websockets_with_a_login_cookie_receive_the_workers_events(demo, worker, live_asgi):
    requester = login(live_asgi.url, "requester", "requester-demo")
    approver = login(live_asgi.url, "approver", "approver-demo")
    session = services.session_create(app_name="reimbursement_agent", user_id="requester")

    # A requester is no approver: the inbox socket is refused at the handshake.
    with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
        open_socket(live_asgi, "/ws/approvals/", requester).close()
    assert refused.value.response.status_code == 403
    # Without a cookie, the conversation socket is refused too.
    with pytest.raises(websockets.exceptions.InvalidStatus):
        ws_connect(live_asgi.ws_url + f"/ws/sessions/{session.pk}/", origin=live_asgi.url, open_timeout=10).close()

    with (
        open_socket(live_asgi, f"/ws/sessions/{session.pk}/?after=0", requester) as conversation,
        open_socket(live_asgi, "/ws/approvals/", approver) as inbox,
    ):
        assert 'id="session-status"' in conversation.recv(timeout=10)

        assert post(requester, f"/sessions/{session.pk}/messages/", {"text": MESSAGE}).status_code == 200

        frames = ws_receive_until(
            inbox,
            lambda html: "meals · $200.00" in html and 'title="open tickets"' in html,
            "the new ticket in the inbox, then the counts",
        )
        assert 'title="open tickets" hx-swap-oob="true">1</span>' in "".join(frames)
        frames = ws_receive_until(
            conversation,
            lambda html: MESSAGE in html and "waiting for a human" in html,
            "the pending ask_for_approval call",
        )
        assert "<code>ask_for_approval</code>" in "".join(frames)

        ticket = wait_for(lambda: open_ticket(session.pk), what="the ticket")
        assert post(approver, f"/tickets/{ticket.pk}/approve/", {"approve-comment": ""}).status_code == 200

        ws_receive_until(conversation, lambda html: DONE in html, "the reimbursement text")
        decided = f'<tr id="pending-call-{ticket.pk}" class="row-approved closed" hx-swap-oob="outerHTML">'
        frames = ws_receive_until(
            inbox,
            lambda html: decided in html and 'title="open tickets"' in html.split(decided)[-1],
            "the row approved in place, then the counts",
        )
        assert 'title="open tickets" hx-swap-oob="true">0</span>' in "".join(frames)  # the nav count drops
        assert "by approver" in next(f for f in frames if f.startswith(decided))
    requester.close()
    approver.close()
