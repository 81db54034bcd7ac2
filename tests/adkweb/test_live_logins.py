"""A login that ends closes its websockets at once (adkweb.live_logins), not at the next re-check of
rights (adkweb.live_rights, here every 600 s): a logout closes the sockets opened under that login's
session cookie, with each socket's refusal code (the page does not reconnect), and no other login's; a
password changed (all the person's other logins end) or an account deactivated closes every socket of
that person. A save that ends no login closes nothing."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from agents_app import services
from approvals.events import notify_ticket_changed
from tests.adkweb.test_live_rights import _closed_with, _open_with_cookie, make_ticket

pytestmark = pytest.mark.django_db(transaction=True)
AT_ONCE = 1.0  # seconds


@pytest.fixture(autouse=True)
def slow_recheck(settings):
    settings.ADKWEB_LIVE_RECHECK_SECONDS = 600


@sync_to_async
def _login(user) -> Client:
    """A login of its own (a browser), its CSRF cookie set as a page sets it."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.get("/accounts/login/").status_code == 200
    return client


@sync_to_async
def _post(client: Client, path: str, data: dict | None = None, csrf: bool = True) -> int:
    token = {"csrfmiddlewaretoken": client.cookies["csrftoken"].value} if csrf else {}
    return client.post(path, {**token, **(data or {})}).status_code


async def _still_served(inbox) -> None:
    """The inbox socket is open and gets a new ticket pushed (its row, then the counts)."""
    call = await make_ticket()
    await sync_to_async(notify_ticket_changed)(ticket_id=call.pk, session_pk=call.session_id, opened=True)
    frames = [await inbox.receive_from(timeout=3)]
    while 'id="nav-open-count"' not in frames[-1]:
        frames.append(await inbox.receive_from(timeout=3))


async def test_logging_out_closes_that_logins_sockets_at_once_and_no_other_logins(demo):
    session = await sync_to_async(services.session_create)(app_name="reimbursement_agent", user_id="requester")
    leaving, staying = await _login(demo["approver"]), await _login(demo["approver"])
    ended = [
        await _open_with_cookie(f"/ws/sessions/{session.pk}/", leaving),
        await _open_with_cookie("/ws/approvals/", leaving),
    ]
    await ended[0].receive_from()  # the status
    other = await _open_with_cookie("/ws/approvals/", staying)

    assert await _post(leaving, "/accounts/logout/", csrf=False) == 403  # refused: logs nobody out
    assert [await _closed_with(s, within=0.3) for s in ended] == [None, None]

    assert await _post(leaving, "/accounts/logout/") == 302
    assert [await _closed_with(s, within=AT_ONCE) for s in ended] == [4403, 4003]
    assert await _closed_with(other, within=0.3) is None
    await _still_served(other)
    for s in [*ended, other]:
        await s.disconnect()


async def test_a_password_changed_on_one_login_closes_the_other_logins_sockets(demo):
    """Django keeps the changer's login (update_session_auth_hash) and ends the others."""
    admin = demo["admin"]
    changing, elsewhere = await _login(admin), await _login(admin)
    others = [await _open_with_cookie("/ws/approvals/", elsewhere), await _open_with_cookie("/ws/sessions/", elsewhere)]
    new = "a new one, after a leak"
    passwords = {"old_password": "admin-demo", "new_password1": new, "new_password2": new}
    assert await _post(changing, "/admin/password_change/", passwords) == 302
    assert [await _closed_with(s, within=AT_ONCE) for s in others] == [4003, 4403]
    assert (await sync_to_async(changing.get)("/")).status_code == 200  # the changer is still in
    for s in others:
        await s.disconnect()


async def test_an_account_deactivated_has_its_sockets_closed_at_once(demo):
    approver = demo["approver"]
    logins = [await _login(approver), await _login(approver)]
    sockets = [await _open_with_cookie("/ws/approvals/", login) for login in logins]
    approver.is_active = False
    await sync_to_async(approver.save)()
    assert [await _closed_with(s, within=AT_ONCE) for s in sockets] == [4003, 4003]
    for s in sockets:
        await s.disconnect()


async def test_a_save_that_ends_no_login_closes_nothing(demo):
    approver = demo["approver"]
    inbox = await _open_with_cookie("/ws/approvals/", await _login(approver))
    approver.first_name = "Renamed"
    await sync_to_async(approver.save)()
    await _login(approver)  # another login: its last_login saved
    assert await _closed_with(inbox, within=0.3) is None
    await _still_served(inbox)
    await inbox.disconnect()
