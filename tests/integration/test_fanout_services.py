"""Fan-out across processes: 50 sockets on one conversation (owner, approvers and observers mixed)
each get every event the worker process stores exactly once, in the order it was stored, through
the Redis channel layer (the fragments rendered once per audience by the publisher)."""

from __future__ import annotations

import re
import time

import pytest
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.test import Client

from adkweb.routing import websocket_urlpatterns
from agents_app import services
from agents_app.models import StoredEvent, Turn
from approvals.models import PendingCall
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

app = URLRouter(websocket_urlpatterns)
SOCKETS = 50
MESSAGE = "Please reimburse 200$ for meals"
ARTICLE = re.compile(r'<article id="event-([^"]+)" class="([^"]*)"')


@pytest.fixture
def own_layer():
    """A Redis channel layer instance of this test's own (see test_live_services.own_layer)."""
    from channels.layers import channel_layers

    shared = channel_layers.backends.get("default")
    channel_layers.backends["default"] = channel_layers.make_backend("default")
    yield channel_layers.backends["default"]
    if shared is None:
        channel_layers.backends.pop("default", None)
    else:
        channel_layers.backends["default"] = shared


def _final_ids(frames: list[str]) -> list[str]:
    """Event ids of the stored (not streaming) event cards in these frames, in arrival order."""
    return [m.group(1) for f in frames for m in ARTICLE.finditer(f) if "event-streaming" not in m.group(2)]


def _settled(session_pk: int) -> list[str] | None:
    """The conversation's stored event ids once its turn is done and its ticket open."""
    if Turn.objects.filter(session_id=session_pk, status__in=["queued", "running"]).exists():
        return None
    if not PendingCall.objects.filter(session_id=session_pk, status="pending").exists():
        return None
    return list(StoredEvent.objects.filter(session_id=session_pk).order_by("id").values_list("event_id", flat=True))


def _message_settled(requester, session_pk: int) -> list[str]:
    """The requester sends MESSAGE as the page does; the conversation's stored event ids once the turn is
    done and its ticket open."""
    client = Client()
    client.force_login(requester)
    r = client.post(f"/sessions/{session_pk}/messages/", {"text": MESSAGE}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    stored = wait_for(lambda: _settled(session_pk), timeout=30, what="the turn and its ticket")
    assert len(stored) >= 3, stored
    return stored


def _socket_frames(ws, stored: list[str]) -> list[str]:
    """What a real websocket (websockets' sync client) receives until every one of `stored` came, then
    anything after the last event, too (up to 30 s)."""
    frames: list[str] = []
    deadline = time.monotonic() + 30
    while set(_final_ids(frames)) != set(stored) and time.monotonic() < deadline:
        try:
            frames.append(ws.recv(timeout=max(deadline - time.monotonic(), 0.01)))
        except TimeoutError:
            break
    while True:
        try:
            frames.append(ws.recv(timeout=0.3))
        except TimeoutError:
            return frames


@pytest.fixture(params=["prompt", "behind"])
def reader(request, own_layer):
    """The layer's reader as it runs (`prompt`), or `behind`: each pop waits a moment first, so that
    what the worker publishes meanwhile is taken in bursts (several messages per pop). Yields the
    number of messages each pop took."""
    taken: list[int] = []
    pop = own_layer._pop

    async def late_pop(index, key):
        import asyncio

        if request.param == "behind":
            await asyncio.sleep(0.15)
        popped = await pop(index, key)
        if popped:
            taken.append(len(popped))
        return popped

    own_layer._pop = late_pop
    yield taken
    if request.param == "behind":
        assert max(taken) > 1, taken  # bursts were taken (else this case tested nothing more)


@pytest.mark.usefixtures("transport")  # through ASGI, and as under daphne (frames written as the layer receives)
async def test_fifty_sockets_get_every_event_exactly_once_in_order(demo, worker, own_layer, reader):
    session = await sync_to_async(services.session_create)(app_name="reimbursement_agent", user_id="requester")
    viewers = [demo["requester"], demo["approver"], demo["observer"], demo["admin"]]
    sockets = []
    for i in range(SOCKETS):
        comm = WebsocketCommunicator(app, f"/ws/sessions/{session.pk}/?after=0")
        comm.scope["user"] = viewers[i % len(viewers)]
        assert (await comm.connect())[0], i
        assert 'id="session-status"' in await comm.receive_from()
        sockets.append(comm)

    requester = Client()
    await sync_to_async(requester.force_login)(demo["requester"])
    r = await sync_to_async(requester.post)(
        f"/sessions/{session.pk}/messages/", {"text": MESSAGE}, HTTP_HX_REQUEST="true"
    )
    assert r.status_code == 200
    stored = await sync_to_async(wait_for)(lambda: _settled(session.pk), timeout=30, what="the turn and its ticket")
    assert len(stored) >= 3, stored  # the message, the call that waits for a human, its pending response

    try:
        for i, comm in enumerate(sockets):
            frames: list[str] = []
            deadline = time.monotonic() + 30
            while set(_final_ids(frames)) != set(stored) and time.monotonic() < deadline:
                try:
                    frames.append(await comm.receive_from(timeout=max(deadline - time.monotonic(), 0.01)))
                except TimeoutError:
                    break
            while not await comm.receive_nothing(timeout=0.3):  # anything after the last event, too
                frames.append(await comm.receive_from())
            assert _final_ids(frames) == stored, f"socket {i} ({comm.scope['user']}): {_final_ids(frames)} != {stored}"
            assert "waiting for a human" in "".join(frames), i
    finally:
        for comm in sockets:
            await comm.disconnect()


async def test_a_process_receives_each_group_message_once_for_all_its_sockets(own_layer):
    """adkweb.channel_layers.RedisChannelLayer: one reader pops a message for the process's channels
    and hands it to each channel's queue. channels_redis's own receive made every waiting channel race
    for a lock, with two new tasks per channel per message (a third of a web process's time with 1,000
    sockets). Every channel still gets every message once, in order; one that stops receiving loses
    nothing for the others."""
    import asyncio

    layer = own_layer
    names = [await layer.new_channel() for _ in range(200)]
    for name in names:
        await layer.group_add("fanout-test", name)
    got: dict[str, list[int]] = {name: [] for name in names}

    async def listen(name: str, count: int) -> None:
        for _ in range(count):
            got[name].append((await layer.receive(name))["n"])

    loop = asyncio.get_running_loop()
    tasks_made = 0
    default_factory = loop.get_task_factory()

    def counting(loop, coro, **kwargs):
        nonlocal tasks_made
        tasks_made += 1
        if default_factory is not None:
            return default_factory(loop, coro, **kwargs)
        return asyncio.Task(coro, loop=loop, **kwargs)

    quitter = asyncio.ensure_future(listen(names[0], 1))  # stops receiving after the first message
    listeners = [asyncio.ensure_future(listen(name, 5)) for name in names[1:]]
    await asyncio.sleep(0.2)
    loop.set_task_factory(counting)
    try:
        for n in range(5):
            await layer.group_send("fanout-test", {"type": "test.message", "n": n})
        await asyncio.wait_for(asyncio.gather(*listeners), timeout=30)
    finally:
        loop.set_task_factory(default_factory)
    await quitter
    assert got[names[0]] == [0]
    assert all(got[name] == [0, 1, 2, 3, 4] for name in names[1:])
    # channels_redis's receive made >= 2 tasks per waiting channel per message (2,000 here).
    assert tasks_made < 100, tasks_made
    for name in names:
        await layer.group_discard("fanout-test", name)
