"""Model output and tool arguments are escaped on every page and in every pushed fragment."""

from __future__ import annotations

import json
import time
from typing import Any

from channels.testing import WebsocketCommunicator

from agents_app import services as agent_services
from agents_app.models import Turn
from approvals.models import PendingCall
from tests.adkweb.security.sweep import client_for

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"
RAW_TAGS = ("<script>alert(1)", "<img src=x onerror")
ESCAPED = ("&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;img src=x onerror=alert(1)&gt;")


def _assert_escaped(html: str, where: str) -> None:
    for raw in RAW_TAGS:
        assert raw not in html, f"{where}: raw {raw!r} in the HTML"
    assert any(e in html for e in ESCAPED), f"{where}: the escaped argument is not shown at all"


def test_tool_arguments_and_model_output_are_escaped_everywhere(world, worker, wait):
    """The demo model's tool playground puts hostile text in a ticket's arguments and in the
    conversation; every page and every pushed fragment shows it escaped."""
    import asyncio

    from channels.layers import get_channel_layer

    from adkweb.asgi import application

    session = agent_services.session_create(app_name="reimbursement_agent", user_id="requester")
    # Sockets first, so the fragments pushed by the run are captured.
    loop = asyncio.new_event_loop()

    async def open_socket(path: str, user: Any) -> WebsocketCommunicator:
        comm = WebsocketCommunicator(application, path, headers=[(b"origin", b"http://testserver")])
        comm.scope["user"] = user
        assert (await comm.connect())[0], path
        return comm

    conv_socket = loop.run_until_complete(open_socket(f"/ws/sessions/{session.pk}/", world.users["requester"]))
    inbox_socket = loop.run_until_complete(open_socket("/ws/approvals/", world.users["approver"]))
    try:
        args = json.dumps({"purpose": SCRIPT + " " + IMG, "amount": 500})
        agent_services.message_send(session=session, text=f"/call ask_for_approval {args}", streaming=False)
        call = wait(lambda: PendingCall.objects.filter(session=session).first(), what="the ticket")
        wait(
            lambda: not Turn.objects.filter(session=session, status__in=["queued", "running"]).exists(), what="the turn"
        )
        assert SCRIPT in call.args["purpose"], call.args  # the hostile text really is in the data

        def shown(text: str) -> bool:
            return any(e in text for e in ESCAPED)

        async def drain(comm: WebsocketCommunicator, expect: Any = bool) -> str:
            """Frames until `expect(what came)` holds and then 0.5 s pass with none (15 s at most: on a
            loaded machine a consumer's render can take longer than a quiet gap)."""
            frames: list[str] = []
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                if expect("".join(frames)):
                    if await comm.receive_nothing(timeout=0.5):
                        break
                elif await comm.receive_nothing(timeout=0.2):
                    continue
                frames.append(await comm.receive_from())
            return "".join(frames)

        pushed_conv = loop.run_until_complete(drain(conv_socket, shown))
        pushed_inbox = loop.run_until_complete(drain(inbox_socket, shown))
        _assert_escaped(pushed_conv, "conversation socket fragments")
        _assert_escaped(pushed_inbox, "inbox socket fragments")

        # The ticket socket renders the ticket panel when the ticket changes (an update is sent).
        ticket_socket = loop.run_until_complete(open_socket(f"/ws/tickets/{call.pk}/", world.users["approver"]))
        loop.run_until_complete(
            get_channel_layer().group_send(
                f"session-{session.pk}", {"type": "ticket.changed", "ticket_id": call.pk, "session_pk": session.pk}
            )
        )
        changed = loop.run_until_complete(drain(ticket_socket))  # card, status, history: no arguments
        assert changed and not any(raw in changed for raw in RAW_TAGS), changed
        loop.run_until_complete(ticket_socket.disconnect())
        ticket_catch_up = loop.run_until_complete(
            open_socket(f"/ws/tickets/{call.pk}/?after=0", world.users["approver"])
        )
        _assert_escaped(loop.run_until_complete(drain(ticket_catch_up, shown)), "ticket socket catch-up")
        loop.run_until_complete(ticket_catch_up.disconnect())
    finally:
        loop.run_until_complete(conv_socket.disconnect())
        loop.run_until_complete(inbox_socket.disconnect())
        loop.close()

    pages = [
        ("requester", f"/sessions/{session.pk}/", "conversation page"),
        ("observer", f"/sessions/{session.pk}/", "conversation page (observer)"),
        ("approver", f"/tickets/{call.pk}/", "ticket page"),
        ("approver", "/", "inbox"),
        ("approver", f"/?q={SCRIPT}", "inbox searched with the hostile text"),
        ("requester", "/sessions/", "conversation list"),
    ]
    for role, url, label in pages:
        r = client_for(world, role).get(url)
        assert r.status_code == 200, f"{label}: {r.status_code}"
        html = r.content.decode()
        for raw in RAW_TAGS:
            assert raw not in html, f"{label} ({url}): raw {raw!r} in the HTML"
        if label != "conversation list":
            assert any(e in html for e in ESCAPED), f"{label} ({url}): the escaped argument is not shown"
