"""A turn's end on the drain's loop (agents_app.events.anotify_turn_done): its `turn.finished` and the
conversation's new status leave in one batch (adkweb.live.abatched) on real Redis: one round trip,
no question "who watches" first (their page fragments are rendered once per process), each group's
messages in the order made."""

from __future__ import annotations

from agents_app import events
from agents_app.events import SESSIONS_GROUP, session_group
from agents_app.fanout import audience_group

from .test_channel_layer_local import _recorded
from .test_fanout_processes import _layer
from .test_publish_batches import _received, publisher  # noqa: F401 - the fixture

SESSION = 424242


async def test_a_turns_end_is_published_in_one_round_trip_in_order(publisher):  # noqa: F811
    web = _layer()  # a web process: an API follower, the conversation list, an owner's page
    follower, listing, page = await web.new_channel(), await web.new_channel(), await web.new_channel()
    await web.group_add(session_group(SESSION), follower)
    await web.group_add(SESSIONS_GROUP, listing)
    await web.group_add(audience_group(SESSION, "owner"), page)
    await publisher.group_send_many([], ["warm-up"])  # the script loaded (EVALSHA, SCRIPT LOAD)
    commands = _recorded(publisher)

    await events.anotify_turn_done(session_pk=SESSION, turn_id=7, status="idle")

    # Everything in one script: four round trips as two batches (each asking and then sending), two
    # as one batch with its question, one without it.
    assert commands == ["EVALSHA"], commands
    followed, listed, shown = await _received(web, follower), await _received(web, listing), await _received(web, page)
    assert [(m["type"], m.get("status")) for m in followed] == [("turn.finished", "done"), ("session.status", None)]
    assert [m["type"] for m in listed] == ["session.status"]
    assert [m["type"] for m in shown] == ["live.turn_finished", "live.status"]
    assert shown[0]["turn_id"] == 7 and shown[1]["status"] == "idle"
    del publisher.connection(0).execute_command


async def test_a_turns_end_packs_each_message_once_and_every_audience_gets_the_same(publisher, monkeypatch):  # noqa: F811
    """Its nine messages are four: `turn.finished`, the status for the conversation and the list, and a
    fragment of each for the three audiences. Each is packed once for the batch (nine times before),
    and every audience's page gets the same two fragments, the follower and the list theirs."""
    web = _layer()
    follower, listing = await web.new_channel(), await web.new_channel()
    pages = {audience: await web.new_channel() for audience in ("owner", "approver", "observer")}
    await web.group_add(session_group(SESSION + 2), follower)
    await web.group_add(SESSIONS_GROUP, listing)
    for audience, page in pages.items():
        await web.group_add(audience_group(SESSION + 2, audience), page)
    packed, stored_form = [], publisher._stored_form
    monkeypatch.setattr(publisher, "_stored_form", lambda m: packed.append(m["type"]) or stored_form(m))

    await events.anotify_turn_done(session_pk=SESSION + 2, turn_id=11, status="idle", revision=5)

    assert packed == ["turn.finished", "live.turn_finished", "session.status", "live.status"]
    followed = await _received(web, follower)
    assert followed == [
        {"type": "turn.finished", "session_pk": SESSION + 2, "turn_id": 11, "status": "done", "revision": 5},
        {"type": "session.status", "session_pk": SESSION + 2},
    ]
    assert await _received(web, listing) == [followed[1]]
    shown = {audience: await _received(web, page) for audience, page in pages.items()}
    assert [m["type"] for m in shown["owner"]] == ["live.turn_finished", "live.status"]
    assert shown["owner"][0]["turn_id"] == 11 and shown["owner"][1]["status"] == "idle"
    assert shown["approver"] == shown["owner"] and shown["observer"] == shown["owner"]


async def test_a_turns_end_nobody_watches_a_page_of_renders_its_status_once_per_process(publisher, monkeypatch):  # noqa: F811
    from agents_app import fanout

    rendered = []
    render = fanout.render_to_string
    monkeypatch.setattr(fanout, "render_to_string", lambda *a, **kw: rendered.append(a[0]) or render(*a, **kw))
    fanout._status_html.cache_clear()
    web = _layer()
    follower = await web.new_channel()
    await web.group_add(session_group(SESSION + 1), follower)
    await publisher.group_send_many([], ["warm-up"])
    commands = _recorded(publisher)

    for turn_id in (8, 9):
        await events.anotify_turn_done(session_pk=SESSION + 1, turn_id=turn_id, status="waiting")

    assert commands == ["EVALSHA", "EVALSHA"], commands
    assert [m["type"] for m in await _received(web, follower)] == ["turn.finished", "session.status"] * 2
    assert rendered == [fanout.DETAIL + "#status"]  # the chip, once: then from the process's memory
    del publisher.connection(0).execute_command
