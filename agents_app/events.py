"""Live updates for conversations: group names and typed payloads.

Each notify_* sends the ids-only message to `session-<pk>` (the API's turn watchers and the ticket
page read the database on it) and has agents_app.fanout render the conversation page's fragment
once per audience and send it to the audience groups (pages forward it as it is). Here the async ones
(anotify_*, from an event loop: the session store's appends, the drain) and the claim's question who
watches (`ask_ahead`); those sent from a thread, and the fan-out's registration, are
agents_app.events_sync' (imported back here, where their callers read them)."""

from __future__ import annotations

import asyncio
import contextvars
import logging

from asgiref.sync import sync_to_async

from adkweb.live import abatched, agroup_send, agroup_send_each, agroups_watched
from adkweb.watch_hints import counted_empty_lately, counted_empty_since, seen_watched

from . import events_sync
from .event_messages import (  # noqa: F401 - re-exported (the API, pages, approvals and tests read them here)
    EVENT_DATA_MAX,
    SESSIONS_GROUP,
    SessionEventMessage,
    SessionPartialMessage,
    SessionStatusMessage,
    TurnFinishedMessage,
    TurnRetriedMessage,
    session_group,
)
from .events_sync import (  # noqa: F401 - re-exported (the thread's notify_*: services, turn_close, approvals, tests)
    _event_message,
    _quietly,
    _stored,
    notify_session_event,
    notify_session_status,
    notify_ticket_card,
    notify_turn_finished,
    notify_turn_retried,
    register_fanout,
    ticket_card_groups,
)

# The order of a turn's publishes; its names are the callers' (runner, turn_exec, the session store).
from .publish_order import (  # noqa: F401 - re-exported
    TurnPublisher,
    apublish_in_order,
    apublish_now_or_in_order,
    publish_soon,
    publishes_sent,
    status_sent,
    turn_publisher,
    turn_stored,
)

logger = logging.getLogger(__name__)

# The fan-out (agents_app.fanout) is events_sync._fanout, registered by AgentsAppConfig.ready
# (`register_fanout`), read there at each call.


@abatched()
async def anotify_session_event(
    *,
    session_pk: int,
    event_pk: int,
    revision: int | None = None,
    turn_id: int | None = None,
    author: str = "",
    data_json: str | None = None,
    timestamp: float | None = None,
) -> None:
    """notify_session_event from async code, once the event is committed (the session store's
    appends): the message leaves from the event loop, and the thread hop to render the fragments
    (agents_app.fanout.publish_event) happens only when a page of the conversation is open. Where
    this process last heard that one is (adkweb.watch_hints.seen_watched: the turn's "running" status a
    moment ago, or its previous event), it renders without asking first, for every audience, and
    the ids-only message leaves with the fragments: one round trip instead of two before the frame."""
    await agroup_send(
        session_group(session_pk), _event_message(session_pk, event_pk, revision, turn_id, author, data_json)
    )
    if events_sync._fanout is None:
        return
    groups = [events_sync._fanout.audience_group(session_pk, a) for a in events_sync._fanout.AUDIENCES]
    if not seen_watched(groups):
        await _asked_ahead(session_pk)  # the claim's question, if still on its way, rather than a new one
    watched = set(groups) if seen_watched(groups) else await agroups_watched(groups)
    if watched:
        stored = _stored(session_pk, event_pk, data_json, timestamp)  # rendered as stored, not read back
        publish = sync_to_async(_quietly)
        await publish("publish_event", session_pk=session_pk, event_pk=event_pk, watched=watched, stored=stored)


@abatched()
async def anotify_partial(*, session_pk: int, event: dict, turn_id: int) -> None:
    """A streaming chunk (never stored): pages append it to the event with that id; API streams
    send the event as ADK gave it."""
    parts = (event.get("content") or {}).get("parts") or []
    message = SessionPartialMessage(
        type="session.partial",
        session_pk=session_pk,
        event_id=event.get("id", ""),
        author=event.get("author", ""),
        text="".join(p.get("text") or "" for p in parts if not p.get("thought")),
        turn_id=turn_id,
        event=event,
    )
    await agroup_send(session_group(session_pk), message)
    try:
        if events_sync._fanout is not None:
            await events_sync._fanout.apublish_partial(
                session_pk=session_pk,
                event_id=message["event_id"],
                author=message["author"],
                text=message["text"],
                turn_id=turn_id,
                event=event,
            )
    except Exception:
        logger.warning("Could not render a streaming chunk of session %s.", session_pk, exc_info=True)


@abatched()
async def anotify_session_status(*, session_pk: int, status: str) -> None:
    """notify_session_status from async code (the drain's loop), with the status the caller just
    wrote: the messages leave from the loop, and the page fragment needs no read."""
    msg = SessionStatusMessage(type="session.status", session_pk=session_pk)
    await agroup_send_each([session_group(session_pk), SESSIONS_GROUP], msg)
    if events_sync._fanout is not None:
        try:
            await events_sync._fanout.apublish_status(session_pk=session_pk, status=status)
        except Exception:
            logger.warning("Could not render the live status of session %s.", session_pk, exc_info=True)


def anotify_session_status_soon(*, session_pk: int, status: str) -> None:
    """anotify_session_status without waiting for it (the drain's "running" at a claim: the turn
    starts while it is on its way). The status is already stored (a queued turn made it "running");
    its order before the turn's end is publish_order's (`status_sent`). The drain asked "is a page
    open?" before its claim (`ask_ahead`)."""
    publish_soon(anotify_session_status, {"session_pk": session_pk, "status": status})


# The question "is a page of this conversation open?" asked at a claim, while it is on its way.
_asking: dict[int, asyncio.Future[set[str]]] = {}
# Conversations whose last turn ended by this process's drains left a ticket open ("waiting"), the
# oldest first: their claim asks (`ask_ahead`). Bounded: one forgotten a long time ago asks anyway.
_waiting: dict[int, None] = {}
WAITING_MAX = 4096


def ask_ahead(session_pk: int) -> None:
    """Ask the channel layer now, without waiting, whether a page of the conversation is open, unless
    this process heard so lately (adkweb.watch_hints.seen_watched). The claim's "running" status rides with
    the turn's first event (publish_order's lead), so its answer would come with that batch: too late
    for the event, which would ask again and send its fragment in a second round trip (a click's first
    resumed frame waited on both). Asked here, the answer is in (adkweb.watch_hints._seen) while ADK starts
    the turn and stores its first event, which then leaves with its fragment in one round trip. The
    drain asks as it sends its claim (agents_app.runner), so that the question's work on the loop (its
    task, its script, its reply) is done while the claim's statement is on its way rather than on the
    turn's. An answer is never held as "not watched" (the event asks again with its batch: no page is
    missed), so the question is not asked where a batch of this process counted every audience group
    of the conversation empty within adkweb.watch_hints.EMPTY_LATELY seconds (`counted_empty_lately`: a
    conversation nobody watches whose previous turn ended a moment ago: an API client's next one),
    unless that turn left a ticket open (`_waiting`): the next turn is then a person's click, whose
    page may have opened since (target 6's bench opens it a few ms before the click). A page opened
    since has the turn's first event's fragment a round trip later, nothing less. Elsewhere a
    conversation nobody watches pays the question (one Redis round trip off the turn's way; a drain
    that finds nothing owed too)."""
    if events_sync._fanout is None or _on_its_way(session_pk) is not None:
        return
    groups = [events_sync._fanout.audience_group(session_pk, a) for a in events_sync._fanout.AUDIENCES]
    if seen_watched(groups) or (session_pk not in _waiting and counted_empty_lately(groups)):
        return
    # In a context of its own (no batch of the caller's to take along); it never raises (all groups on an error).
    asked = asyncio.get_running_loop().create_task(agroups_watched(groups), context=contextvars.Context())
    _asking[session_pk] = asked
    asked.add_done_callback(lambda done: _asking.pop(session_pk, None) if _asking.get(session_pk) is done else None)


def _on_its_way(session_pk: int) -> asyncio.Future[set[str]] | None:
    """The question `ask_ahead` asked for this conversation from this loop, if it is not answered yet."""
    asked = _asking.get(session_pk)
    if asked is None or asked.done() or asked.get_loop() is not asyncio.get_running_loop():
        return None
    return asked


async def _asked_ahead(session_pk: int) -> None:
    """Until the claim's question for this conversation (`ask_ahead`), if any is on its way, is answered."""
    asked = _on_its_way(session_pk)
    if asked is not None:
        await asyncio.shield(asked)


@abatched()
async def anotify_turn_finished(*, session_pk: int, turn_id: int, status: str, revision: int | None = None) -> None:
    """notify_turn_finished from async code (the drain's loop)."""
    msg = TurnFinishedMessage(type="turn.finished", session_pk=session_pk, turn_id=turn_id, status=status)
    if revision is not None:
        msg["revision"] = revision
    await agroup_send(session_group(session_pk), msg)
    if events_sync._fanout is None:
        return
    if status != "done":  # a failed turn's error line is read and rendered on a thread
        await sync_to_async(_quietly)("publish_turn_finished", session_pk=session_pk, turn_id=turn_id, status=status)
        return
    try:
        await events_sync._fanout.apublish_turn_done(session_pk=session_pk, turn_id=turn_id)
    except Exception:
        logger.warning("Could not publish the end of turn %s.", turn_id, exc_info=True)


@abatched()
async def anotify_turn_ended(*, session_pk: int, turn_id: int, revision: int, since: float | None = None) -> None:
    """A turn ran to its end and every event it stored was published before this, the last at
    `revision` (the session's revision after it): `turn.finished` marked `ahead`, sent by the drain
    while its DONE statement runs (agents_app.runner), not after it. An API follower that has
    accounted for every revision up to exactly that one has every event of the turn and answers
    (agents_app.api.watch); any other follower waits for the DONE's own `turn.finished`, and pages
    ignore this one (approvals.consumers). What the answer said holds whatever becomes of the DONE
    statement: the turn's events are all stored (synchronous commits, under its lease), and a turn
    whose DONE is lost (PostgreSQL's crash, a lease run out) is closed DONE by the checked path from
    them, without calling the model or a tool again (agents_app.turn_sql's "Both commit
    asynchronously").

    Not sent when the session's group was counted without members by a batch sent after `since`
    (the turn's claim, monotonic: adkweb.watch_hints.counted_empty_since; a turn's event's batch that asked
    who watches counts it): a follower of the turn joins the group before the turn can be claimed
    (agents_app.services.before_turn_commit), so nobody would take it, and one that joined later
    has the DONE's own `turn.finished`, as every follower it does not complete."""
    if since is not None and counted_empty_since(session_group(session_pk), since):
        return
    msg = TurnFinishedMessage(
        type="turn.finished", session_pk=session_pk, turn_id=turn_id, status="done", revision=revision, ahead=True
    )
    await agroup_send(session_group(session_pk), msg)


async def anotify_turn_done(*, session_pk: int, turn_id: int, status: str, revision: int | None = None) -> None:
    """A turn that ended DONE (the drain's loop): `turn.finished` and the conversation's new status
    in one batch: one round trip on the Redis layer (their page fragments need no question "who
    watches" first: agents_app.fanout.apublish_turn_done, apublish_status), where two batches that
    each asked first made four. Notes whether the turn left a ticket open (`_waiting`)."""
    if status == "waiting":
        _waiting[session_pk] = None
        if len(_waiting) > WAITING_MAX:  # the oldest goes (another drain thread may be dropping it too)
            _waiting.pop(next(iter(_waiting), 0), None)
    else:
        _waiting.pop(session_pk, None)
    async with abatched():
        await anotify_turn_finished(session_pk=session_pk, turn_id=turn_id, status="done", revision=revision)
        await anotify_session_status(session_pk=session_pk, status=status)
