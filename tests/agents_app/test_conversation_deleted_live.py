"""A conversation deleted (ADK's delete_session: archived, nothing erased) stops being pushed to the
pages watching it at once, not at their next rights re-check (60 s by default): every open page of it
closes with the refusal code (the page says live updates stopped), on each path that deletes it."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator

from agents_app import services
from agents_app.session_archive import session_archive, session_delete
from agents_app.session_service import DjangoSessionService
from tests.sockets import closed_with, connect

pytestmark = pytest.mark.django_db(transaction=True)
REFUSED = 4403


@pytest.fixture(autouse=True)
def slow_recheck(settings):
    settings.ADKWEB_LIVE_RECHECK_SECONDS = 60  # the default: only the deletion's own notice can close in time


@pytest.fixture
def session(demo):
    return services.session_create(app_name="reimbursement_agent", user_id="requester")


async def _open(path: str, user) -> WebsocketCommunicator:
    comm = await connect(path, user)
    await comm.receive_from()  # the catch-up frame
    return comm


def _by_service(session) -> None:
    async_to_sync(DjangoSessionService().delete_session)(
        app_name=session.app_name, user_id=session.user_id, session_id=session.session_id
    )


@pytest.mark.parametrize(
    "delete",
    [
        pytest.param(
            lambda s, who: session_delete(app_name=s.app_name, user_id=s.user_id, session_id=s.session_id, actor=who),
            id="api",
        ),
        pytest.param(lambda s, who: session_archive(session=s, actor=who), id="archive"),
        pytest.param(lambda s, who: _by_service(s), id="session-service"),
    ],
)
async def test_every_page_of_a_deleted_conversation_closes_at_once(demo, session, delete):
    pages = [
        await _open(f"/ws/sessions/{session.pk}/", demo["requester"]),
        await _open(f"/ws/sessions/{session.pk}/", demo["observer"]),
        await _open(f"/ws/sessions/{session.pk}/", demo["admin"]),
    ]
    await sync_to_async(delete)(session, demo["requester"])
    assert [await closed_with(comm) for comm in pages] == [REFUSED] * 3
    for comm in pages:
        await comm.disconnect()


async def test_a_conversation_kept_keeps_its_pages(demo, session):
    """The notice names its conversation: another one's pages stay open."""
    other = await sync_to_async(services.session_create)(app_name="reimbursement_agent", user_id="requester")
    comm = await _open(f"/ws/sessions/{other.pk}/", demo["observer"])
    await sync_to_async(session_archive)(session=session, actor=demo["requester"])
    assert await closed_with(comm, within=1.0) is None
    await comm.disconnect()
