"""One group message per web process (adkweb.channel_layers.RedisChannelLayer): a group's members in
Redis are one channel per process, each process hands the message to its own sockets in memory.
With real Redis: two layer instances (two processes' worth), and two daphne processes with 50 real
websockets (login cookies) fed by the worker process, each socket getting every event once, in order,
written as frames prepared once per process (adkweb.wsframes)."""

from __future__ import annotations

import asyncio
import re
import sys
import time

import redis
from asgiref.sync import sync_to_async
from django.conf import settings
from django.test import Client
from websockets.sync.client import connect as ws_connect

from agents_app import services
from approvals.events import notify_ticket_changed
from approvals.fanout import APPROVALS_GROUP
from tests.approvals.policy_helpers import open_ticket, person, policy, team
from tests.conftest import wait_for
from tests.frames import direct_delivery_contract

from . import processes
from .test_channel_layer_local import _recorded
from .test_fanout_services import _final_ids, _message_settled, _socket_frames

GROUP = "fanout-processes"


def _layer():
    from channels.layers import channel_layers

    return channel_layers.make_backend("default")


async def _got(layer, channel: str, timeout: float = 0.3) -> list[int]:
    """What a channel has received: every message until none comes for `timeout`."""
    got = []
    while True:
        try:
            got.append((await asyncio.wait_for(layer.receive(channel), timeout))["n"])
        except TimeoutError:
            return got


def _members(group: str) -> list[bytes]:
    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        return client.zrange(f"adkweb:group:{group}", 0, -1)
    finally:
        client.close()


async def test_a_group_has_one_member_per_process_and_each_process_delivers_in_memory():
    a, b, sender = _layer(), _layer(), _layer()
    ours = {a: [await a.new_channel() for _ in range(30)], b: [await b.new_channel() for _ in range(20)]}
    for layer, names in ours.items():
        for name in names:
            await layer.group_add(GROUP, name)
    assert len(await sync_to_async(_members)(GROUP)) == 2  # not 50
    try:
        for n in range(5):
            await sender.group_send(GROUP, {"type": "test.message", "n": n})
        for layer, names in ours.items():
            got = await asyncio.gather(*(_got(layer, name) for name in names))
            assert got == [[0, 1, 2, 3, 4]] * len(names)  # every message once, in order

        gone, staying = ours[a][:10], ours[a][10:]
        for name in gone:
            await a.group_discard(GROUP, name)
        assert a.local_members(GROUP) == set(staying)
        await sender.group_send(GROUP, {"type": "test.message", "n": 5})
        assert await asyncio.gather(*(_got(a, name) for name in gone)) == [[]] * 10  # left: nothing more
        assert await asyncio.gather(*(_got(a, name) for name in staying)) == [[5]] * 20
        assert await asyncio.gather(*(_got(b, name) for name in ours[b])) == [[5]] * 20

        for name in staying:
            await a.group_discard(GROUP, name)
        # The last of a process's sockets left: nothing of the group stays in its memory, nor in Redis.
        assert a.local_members(GROUP) == set() and a._local == {} and a._member_of == {} and a._group_of == {}
        assert len(await sync_to_async(_members)(GROUP)) == 1
        await sender.group_send(GROUP, {"type": "test.message", "n": 6})
        assert await asyncio.gather(*(_got(b, name) for name in ours[b])) == [[6]] * 20
    finally:
        for name in ours[b]:
            await b.group_discard(GROUP, name)
    assert await sync_to_async(_members)(GROUP) == []


async def test_a_channel_sent_to_directly_and_through_its_group_gets_both_in_order():
    layer, sender = _layer(), _layer()
    name = await layer.new_channel()
    await layer.group_add(GROUP, name)
    try:
        await sender.group_send(GROUP, {"type": "test.message", "n": 0})
        await sender.send(name, {"type": "test.message", "n": 1})
        await sender.group_send(GROUP, {"type": "test.message", "n": 2})
        assert await _got(layer, name) == [0, 1, 2]
    finally:
        await layer.group_discard(GROUP, name)


async def test_a_member_left_in_redis_by_a_failed_leave_delivers_nothing():
    layer, sender = _layer(), _layer()
    name = await layer.new_channel()
    await layer.group_add(GROUP, name)
    old = layer._member_of[GROUP]
    layer._leave_locally(GROUP, name)  # as when the removal from Redis failed (Redis down)
    await layer.group_add(GROUP, name)
    assert layer._member_of[GROUP] != old and len(await sync_to_async(_members)(GROUP)) == 2
    try:
        await sender.group_send(GROUP, {"type": "test.message", "n": 0})
        assert await _got(layer, name) == [0]  # once, not once per member
        assert old not in layer._queues  # no queue piling up for the stale member
    finally:
        await layer.group_discard(GROUP, name)
        await sender.group_discard(GROUP, old)


def _daphne() -> tuple[processes.Service, str]:
    port = processes.free_port()
    args = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "adkweb.asgi:application"]
    web = processes.Service(args, processes.service_env(settings.REDIS_URL), ready="Listening on TCP address")
    return web.start(), f"127.0.0.1:{port}"


SOCKETS = 50


def test_fifty_real_websockets_on_two_daphne_processes_get_every_event_once_in_order(demo, worker):
    session = services.session_create(app_name="reimbursement_agent", user_id="requester")
    approver = Client()
    approver.force_login(demo["approver"])
    cookie = f"sessionid={approver.cookies['sessionid'].value}"
    webs = [_daphne(), _daphne()]
    sockets = []
    try:
        for i in range(SOCKETS):
            host = webs[i % 2][1]
            ws = ws_connect(
                f"ws://{host}/ws/sessions/{session.pk}/?after=0",
                additional_headers={"Cookie": cookie, "Origin": f"http://{host}"},
                open_timeout=20,
            )
            assert 'id="session-status"' in ws.recv(timeout=20)
            sockets.append(ws)
        assert len(_members(f"session-{session.pk}.approver")) == 2  # one per process, not 50

        stored = _message_settled(demo["requester"], session.pk)

        for i, ws in enumerate(sockets):
            frames = _socket_frames(ws, stored)
            assert _final_ids(frames) == stored, f"socket {i}: {_final_ids(frames)} != {stored}"
            text = "".join(frames)
            assert "waiting for a human" in text, i
            assert len(re.findall(r'id="session-status"', text)) >= 1, i  # the status badge still moves

        for ws in sockets[0::2]:  # every socket of the first process leaves
            ws.close()
        wait_for(
            lambda: len(_members(f"session-{session.pk}.approver")) == 1, timeout=10, what="the process's member gone"
        )
    finally:
        for ws in sockets:
            ws.close()
        for web, _ in webs:
            web.stop()


async def test_direct_delivery_takes_or_queues_in_order():
    await direct_delivery_contract(_layer())


def _inbox_frames(ws, quiet: float = 0.5) -> list[str]:
    frames = [ws.recv(timeout=20)]
    while True:
        try:
            frames.append(ws.recv(timeout=quiet))
        except TimeoutError:
            return frames


def _routed_world(demo) -> tuple[dict[str, str], object]:
    """A policy routes tickets over 100 to finance (approver2); olga, an approver outside it, may not
    see them. Their login cookies."""
    finance = team("finance", demo["approver2"])
    policy("finance", groups=(finance,), condition="amount > 100")
    cookies = {}
    for name, user in (("insider", demo["approver2"]), ("outsider", person("olga", approver=True))):
        client = Client()
        client.force_login(user)
        cookies[name] = f"sessionid={client.cookies['sessionid'].value}"
    return cookies, finance


def test_inbox_sockets_on_daphne_get_each_change_once_and_only_rows_they_may_see(transactional_db, demo):
    """Inbox sockets under daphne take a ticket's change from the layer's message as it is received,
    and write its row and counts (two frames, one write): each socket gets both, as two messages,
    once per change; a socket whose viewer may not see the ticket (routed to another group) gets its
    counts only, never the row rendered once for everyone."""
    cookies, _ = _routed_world(demo)
    web, host = _daphne()
    sockets: dict[str, list] = {"insider": [], "outsider": []}
    try:
        for i in range(20):
            who = "insider" if i % 2 else "outsider"
            sockets[who].append(
                ws_connect(
                    f"ws://{host}/ws/approvals/",
                    additional_headers={"Cookie": cookies[who], "Origin": f"http://{host}"},
                    open_timeout=20,
                )
            )
        time.sleep(1.5)  # past the sockets' first second (they count from the database then: fanout.RECOUNT_SECONDS)
        ticket = open_ticket(args={"purpose": "laptop", "amount": 900.0})
        assert ticket.routed
        notify_ticket_changed(ticket_id=ticket.pk, session_pk=ticket.session_id, opened=True)
        for ws in sockets["insider"]:
            frames = _inbox_frames(ws)
            assert len(frames) == 2, frames
            assert frames[0].startswith('<tbody id="inbox-rows" hx-swap-oob="afterbegin">'), frames[0]
            assert f"pending-call-{ticket.pk}" in frames[0] and "laptop" in frames[0]
            assert 'id="nav-open-count"' in frames[1] and ">1<" in frames[1]
        for ws in sockets["outsider"]:
            frames = _inbox_frames(ws)
            assert len(frames) == 1 and ">0<" in frames[0], frames
            assert f"pending-call-{ticket.pk}" not in frames[0] and "laptop" not in frames[0]

        ticket.status, ticket.closed_by = "approved", demo["approver2"]
        ticket.save()
        notify_ticket_changed(ticket_id=ticket.pk, session_pk=ticket.session_id)
        for ws in sockets["insider"]:
            frames = _inbox_frames(ws)
            assert len(frames) == 2, frames
            assert frames[0].startswith(f'<tr id="pending-call-{ticket.pk}" class="row-approved'), frames[0]
            assert ">0<" in frames[1]
        for ws in sockets["outsider"]:
            frames = _inbox_frames(ws)
            assert len(frames) == 1 and "laptop" not in frames[0], frames
    finally:
        for group in sockets.values():
            for ws in group:
                ws.close()
        # daphne leaves the inbox group as its last socket goes: stopped before that, its member stays in
        # Redis for a day, and later tests would see an inbox watched (test_ticket_rider: nothing read).
        wait_for(lambda: not _members(APPROVALS_GROUP), timeout=10, what="daphne to leave the inbox group")
        web.stop()


async def test_the_reader_pops_each_message_with_one_round_trip_at_most():
    """channels_redis's receive made four round trips per message (restore the backup queue, pop,
    back the message up, remove the backup); the process's reader pops, and hands out (what waits,
    in one pop: test_channel_layer_batch)."""
    layer, sender = _layer(), _layer()
    names = [await layer.new_channel() for _ in range(3)]
    for name in names:
        await layer.group_add(GROUP, name)
    commands = _recorded(layer)  # what the receiving layer's Redis client sends from now on
    try:
        for n in range(5):
            await sender.group_send(GROUP, {"type": "test.message", "n": n})
        got = await asyncio.gather(*(_got(layer, name) for name in names))
        assert got == [[0, 1, 2, 3, 4]] * 3
        assert set(commands) == {"BZMPOP"}, commands  # no EVAL, ZADD, ZPOPMIN
        assert len(commands) <= 5 + 2, commands  # one per message (and the pops that wait)
    finally:
        del layer.connection(0).execute_command  # _recorded wrapped it on this instance
        for name in names:
            await layer.group_discard(GROUP, name)
