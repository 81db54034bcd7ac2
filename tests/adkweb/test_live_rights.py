"""An open websocket follows its person's rights: who loses the right to see what a socket carries
(removed from a role, deactivated, logged out, password changed, the conversation deleted) stops
receiving it within the re-check interval (adkweb.live_rights), the socket closed; whose rights
changed otherwise is closed to reconnect under the new ones. Rights are read on a timer, never per
message."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone

from adkweb.roles import APPROVERS, STAFF_OBSERVERS
from agents_app import services
from agents_app.events import SESSIONS_GROUP
from agents_app.models import Turn
from approvals.events import notify_ticket_changed
from tests.approvals_factories import ticket
from tests.sockets import closed_with as _closed_with
from tests.sockets import connect as _open

pytestmark = pytest.mark.django_db(transaction=True)
CHANGED = 1012  # the htmx ws extension reconnects on it: the connect decides under the new rights

make_ticket = sync_to_async(ticket)


@pytest.fixture(autouse=True)
def quick_recheck(settings):
    settings.ADKWEB_LIVE_RECHECK_SECONDS = 0.2


@pytest.fixture
def session(demo):
    return services.session_create(app_name="reimbursement_agent", user_id="requester")


@sync_to_async
def _leave_group(user, name: str) -> None:
    user.groups.remove(Group.objects.get(name=name))


@sync_to_async
def _deactivate(user) -> None:
    user.is_active = False
    user.save(update_fields=["is_active"])


# -- the conversation socket ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "who, change",
    [
        ("approver", lambda u: _leave_group(u, APPROVERS)),
        ("observer", lambda u: _leave_group(u, STAFF_OBSERVERS)),
        ("requester", _deactivate),
    ],
    ids=["approver-removed-from-approvers", "observer-removed-from-observers", "owner-deactivated"],
)
async def test_a_conversation_socket_closes_when_its_viewer_loses_the_right_to_watch(demo, session, who, change):
    comm = await _open(f"/ws/sessions/{session.pk}/", demo[who])
    await comm.receive_from()  # the status
    assert await _closed_with(comm, within=0.5) is None  # rights unchanged: it stays open
    await change(demo[who])
    assert await _closed_with(comm) == 4403
    await comm.disconnect()


async def test_a_conversation_socket_whose_audience_changed_reconnects_into_the_new_one(demo, session):
    """An approver who is also Django staff, removed from the approvers, watches on as an observer
    (no Retry button): the socket closes with a code the page reconnects on."""
    approver = demo["approver"]
    approver.is_staff = True
    await sync_to_async(approver.save)()
    comm = await _open(f"/ws/sessions/{session.pk}/", approver)
    await comm.receive_from()
    await _leave_group(approver, APPROVERS)
    assert await _closed_with(comm) == CHANGED
    await comm.disconnect()


async def test_a_conversation_socket_closes_when_the_conversation_is_deleted(demo, session):
    from agents_app.models import AdkSession

    comm = await _open(f"/ws/sessions/{session.pk}/", demo["observer"])
    await comm.receive_from()
    await sync_to_async(AdkSession.objects.filter(pk=session.pk).update)(archived_at=timezone.now())
    assert await _closed_with(comm) == 4403
    await comm.disconnect()


async def test_a_closed_socket_gets_nothing_published_after(demo, session):
    from agents_app import events

    comm = await _open(f"/ws/sessions/{session.pk}/", demo["observer"])
    await comm.receive_from()
    await _leave_group(demo["observer"], STAFF_OBSERVERS)
    assert await _closed_with(comm) == 4403
    stored = await sync_to_async(Turn.objects.create)(session=session, kind="message", content={}, status="running")
    await sync_to_async(events.notify_session_status)(session_pk=session.pk)
    await sync_to_async(events.notify_turn_finished)(session_pk=session.pk, turn_id=stored.pk, status="failed")
    assert await comm.receive_nothing(timeout=0.3)
    await comm.disconnect()


# -- the login itself: logged out, password changed -----------------------------------------------
async def _open_with_cookie(path: str, client: Client) -> WebsocketCommunicator:
    from adkweb.asgi import application

    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    comm = WebsocketCommunicator(application, path, headers=[(b"origin", b"http://testserver"), (b"cookie", cookie)])
    assert (await comm.connect())[0], path
    return comm


@pytest.mark.parametrize("how", ["logged out", "password changed elsewhere"])
async def test_sockets_of_a_login_that_ended_close(demo, session, how):
    client = Client()
    await sync_to_async(client.force_login)(demo["approver"])
    sockets = [
        await _open_with_cookie(f"/ws/sessions/{session.pk}/", client),
        await _open_with_cookie("/ws/approvals/", client),
        await _open_with_cookie("/ws/sessions/", client),
    ]
    await sockets[0].receive_from()
    if how == "logged out":
        await sync_to_async(client.logout)()
    else:
        user = demo["approver"]
        user.set_password("a new one, after a leak")
        await sync_to_async(user.save)()
    assert [await _closed_with(s) for s in sockets] == [4403, 4003, 4403]
    for s in sockets:
        await s.disconnect()


async def test_sockets_of_one_login_read_its_rights_once_per_check(demo, session, monkeypatch):
    """A page opened in many tabs (or a bench's 1,000 sockets on one cookie): one read of the
    person's rights per re-check window, shared, not one per socket."""
    from adkweb import live_rights

    # One window for the whole test (a tenth of the interval by default): however long the 20 connects take on
    # a loaded machine, their checks share one read, or each makes its own.
    monkeypatch.setattr(live_rights, "REUSE", 1000.0)
    checks, reads = [], []
    check, read = live_rights.rights_now, live_rights.person_now
    monkeypatch.setattr(live_rights, "rights_now", lambda *a: checks.append(1) or check(*a))
    monkeypatch.setattr(live_rights, "person_now", lambda scope: reads.append(1) or read(scope))
    client = Client()
    await sync_to_async(client.force_login)(demo["observer"])
    sockets = [await _open_with_cookie(f"/ws/sessions/{session.pk}/", client) for _ in range(20)]
    for _ in range(500):  # every socket re-checked (0.2 s +-20% after it opened; later on a loaded machine)
        if len(checks) >= 20:
            break
        await asyncio.sleep(0.02)
    assert len(checks) >= 20 and len(reads) == 1, (len(checks), len(reads))
    for s in sockets:
        assert "session-status" in await s.receive_from()
        assert await s.receive_nothing(timeout=0.01)  # still open
        await s.disconnect()


# -- the inbox, the ticket page, the conversation list ------------------------------------------------
async def test_an_inbox_socket_of_someone_who_no_longer_works_the_inbox_closes(demo, django_user_model):
    @sync_to_async
    def an_approver_only():
        user = django_user_model.objects.create_user("approver3", password="x")
        user.groups.add(Group.objects.get(name=APPROVERS))
        return user

    user = await an_approver_only()
    comm = await _open("/ws/approvals/", user)
    await _leave_group(user, APPROVERS)
    assert await _closed_with(comm) == 4003
    call = await make_ticket()
    await sync_to_async(notify_ticket_changed)(ticket_id=call.pk, session_pk=call.session_id, opened=True)
    assert await comm.receive_nothing(timeout=0.3)
    await comm.disconnect()


async def test_an_inbox_socket_whose_viewer_changed_reconnects(demo):
    """The demo approver, out of the approvers, still works the inbox through the finance team's
    policy: the socket reconnects, and its rows and counts are those of what they may see now."""
    comm = await _open("/ws/approvals/", demo["approver"])
    await _leave_group(demo["approver"], APPROVERS)
    assert await _closed_with(comm) == CHANGED
    await comm.disconnect()


async def test_a_ticket_socket_closes_when_its_viewer_may_no_longer_see_the_ticket(demo):
    call = await make_ticket()
    comm = await _open(f"/ws/tickets/{call.pk}/", demo["observer"])
    await _leave_group(demo["observer"], STAFF_OBSERVERS)
    assert await _closed_with(comm) == 4003
    await comm.disconnect()


async def test_the_list_socket_shows_rows_by_its_viewers_rights_now(demo, session):
    other = await sync_to_async(services.session_create)(app_name="stock_agent", user_id="someone_else")
    comm = await _open("/ws/sessions/", demo["observer"])
    await get_channel_layer().group_send(SESSIONS_GROUP, {"type": "session.status", "session_pk": other.pk})
    assert f'id="session-row-{other.pk}"' in await comm.receive_from()
    await _leave_group(demo["observer"], STAFF_OBSERVERS)
    assert await _closed_with(comm, within=0.6) is None  # any user may keep the list open: their own rows
    await get_channel_layer().group_send(SESSIONS_GROUP, {"type": "session.status", "session_pk": other.pk})
    assert await comm.receive_nothing(timeout=0.3), "a former observer still gets others' conversations"
    await _deactivate(demo["observer"])
    assert await _closed_with(comm) == 4403
    await comm.disconnect()
