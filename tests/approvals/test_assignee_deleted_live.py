"""A deleted assignee's ticket is given back live: the pages that show it (its page, the inbox) say at
once that nobody is assigned and why, as a change of rights does (approvals.assignees)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

from approvals import services
from tests.approvals_factories import ticket
from tests.sockets import connect

pytestmark = pytest.mark.django_db(transaction=True)


async def test_deleting_the_assignee_updates_the_ticket_page_at_once(demo):
    def taken():
        made = ticket()
        services.ticket_assign(ticket=made, actor=demo["approver"], assignee=demo["approver"])
        return made

    call = await sync_to_async(taken)()
    page = await connect(f"/ws/tickets/{call.pk}/", demo["approver2"])
    await sync_to_async(User.objects.filter(username="approver").delete)()
    html = await page.receive_from(timeout=5)
    assert "Nobody is assigned." in html and "Given back: approver may no longer decide it" in html, html
    await page.disconnect()
