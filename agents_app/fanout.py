"""A conversation page's live fragments: rendered once per event per audience, after commit, by the
process that made the change, and carried in the group message. A page's socket forwards them
without touching the database, so a new event reaches 1,000 watchers as fast as Redis and the
websockets carry it (issue 12; before, every socket re-read and re-rendered every message).

Audiences. Who may watch a conversation at all is `agents_app.visibility.session_visible`, checked
when the socket connects, again when an event brings a ticket the page has not seen (a ticket
routed to groups the viewer is not in hides the conversation: the socket closes), and on the socket's
re-check timer (adkweb.live_rights: a lost right closes it, another audience reconnects it). What a
fragment shows may differ by who watches, so each audience has a group of its own,
`session-<pk>.<audience>`, and a page's socket joins its viewer's audience group only: a
fragment rendered for one audience never reaches another, and a rule that narrows what someone
sees is enforced by group membership (give that audience its own render context below). Today:

  owner     the conversation's user; retries a failed turn that stored nothing
  approver  approvers (not the owner); retry too (`can_retry_turns`)
  observer  staff observers and Django staff, and members of a policy's groups who may see every
            ticket of the conversation: read-only, no Retry button

A fragment is rendered once for the audiences that agree on what it depends on: an event card once
for all of them, a failed turn's error line once with its Retry button and once without. The ids-only
messages on `session-<pk>` (agents_app.events) go on as before: the API's turn watchers and the
ticket page read the database on them.

Message types (consumer methods live_*): live.event, live.partial, live.status, live.turn_finished,
live.turn_retried, live.ticket. Sends never raise (adkweb.live).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.template.loader import render_to_string

from adkweb.live import agroup_send_each, group_send_each, groups_watched
from adkweb.live_logins import rights_changed
from adkweb.roles import is_approver

DETAIL = "agents_app/session_detail.html"
EVENT = "agents_app/partials/event.html"
LIVE = "agents_app/partials/live.html"
TICKET_CARD = "agents_app/partials/ticket_card.html"

# Audience -> what its fragments are rendered with (see the module docstring).
AUDIENCES: dict[str, dict[str, Any]] = {
    "owner": {"can_retry": True},
    "approver": {"can_retry": True},
    "observer": {"can_retry": False},
}


def audience_of(user: Any, session: Any) -> str | None:
    """The audience this person watches the conversation as; None if they may not watch it."""
    from .visibility import session_visible

    if not session_visible(user, session):
        return None
    if session.user_id == user.get_username():
        return "owner"
    if is_approver(user):
        return "approver"
    return "observer"


def audience_group(session_pk: int, audience: str) -> str:
    return f"session-{session_pk}.{audience}"


def _deleted(session_pk: int) -> tuple[list[str], dict[str, str]]:
    """A deleted (archived) conversation's open pages each ask their rights again now (adkweb.live_roles):
    none left, each closes with its refusal code and the page says live updates stopped, rather than at
    its next re-check (adkweb.live_rights: up to 78 s)."""
    return [audience_group(session_pk, a) for a in AUDIENCES], rights_changed()


def notify_deleted(session_pk: int) -> None:
    group_send_each(*_deleted(session_pk))


async def anotify_deleted(session_pk: int) -> None:
    await agroup_send_each(*_deleted(session_pk))


def _watched(session_pk: int) -> set[str]:
    """The audience groups of this conversation that have an open page now."""
    return groups_watched([audience_group(session_pk, a) for a in AUDIENCES])


def _per_audience(
    session_pk: int,
    payload: Callable[[dict[str, Any]], dict[str, Any] | None],
    uses: tuple[str, ...] = (),
    watched: set[str] | None = None,
) -> None:
    """Render `payload(context)` once per distinct context and send it to each audience's group.
    `uses`: the context keys the fragment depends on; audiences that agree on them share a render."""
    rendered: dict[tuple, dict[str, Any] | None] = {}
    watched = _watched(session_pk) if watched is None else watched
    sends: list[tuple[dict[str, Any], list[str]]] = []  # a message and its audiences' groups, in order
    for audience, full in AUDIENCES.items():
        group = audience_group(session_pk, audience)
        if group not in watched:
            continue  # no page of this audience is open: nothing to render or send
        context = {k: v for k, v in full.items() if k in uses}
        key = tuple(sorted(context.items()))
        if key not in rendered:
            rendered[key] = payload(context)
        message = rendered[key]
        if message is None:
            continue
        if sends and sends[-1][0] is message:
            sends[-1][1].append(group)
        else:
            sends.append((message, [group]))
    for message, groups in sends:
        group_send_each(groups, message)  # one copy for the audiences that share a render


def _to_all(session_pk: int, message: dict[str, Any], watched: set[str]) -> None:
    group_send_each([g for g in _audience_groups(session_pk) if g in watched], message)


def _audience_groups(session_pk: int) -> list[str]:
    """Every audience group of the conversation, in AUDIENCES' order."""
    return [audience_group(session_pk, audience) for audience in AUDIENCES]


def publish_event(*, session_pk: int, event_pk: int, watched: set[str] | None = None, stored: Any = None) -> None:
    """A stored event: appended to every page (or replacing its streaming card), with the artifact
    list when the event saved artifacts. `watched`: the audience groups to send to, when the caller
    knows them (else asked); `stored`: the row (a StoredEvent) as its committed writer has it, when
    it does (else read back; the tickets an event opens are read in either case)."""
    from . import selectors

    watched = _watched(session_pk) if watched is None else watched
    if not watched:
        return  # nobody watches this conversation: nothing to render
    view: Any
    if stored is not None:
        view = selectors.stored_event_view(stored)
    else:
        view = selectors.session_event_view(session_pk=session_pk, event_pk=event_pk)
    if view is None:
        return  # deleted meanwhile
    artifacts = ""
    if ((view.raw_data or {}).get("actions") or {}).get("artifact_delta"):
        session = selectors.session_get(session_pk=session_pk)
        if session is not None:
            ctx = {"session": session, "artifacts": selectors.session_artifacts(session=session), "oob": "true"}
            artifacts = render_to_string(DETAIL + "#artifacts", ctx)
    ticket_ids = sorted({item.ticket.pk for item in view.items if getattr(item, "ticket", None) is not None})

    def payload(context: dict[str, Any]) -> dict[str, Any]:
        if view.bookkeeping:  # nothing to show: its pk still moves the pages' place (and sends a held status)
            return {
                "type": "live.event",
                "event_pk": event_pk,
                "event_id": view.event_id,
                "ticket_ids": [],
                "append": "",
                "replace": "",
            }
        append = render_to_string(LIVE + "#appended", {"event": view, **context})
        # A page that showed this event streaming replaces that card in place.
        replace = "" if view.is_user else render_to_string(EVENT, {"event": view, "oob": "true", **context})
        return {
            "type": "live.event",
            "event_pk": event_pk,
            "event_id": view.event_id,
            "ticket_ids": ticket_ids,
            "append": append + artifacts,
            "replace": replace + artifacts if replace else "",
        }

    _per_audience(session_pk, payload, watched=watched)


async def apublish_partial(
    *, session_pk: int, event_id: str, author: str, text: str, turn_id: int, event: dict
) -> None:
    """A streaming chunk: the first one a page sees makes a streaming card, the next ones append."""
    from . import timeline

    if not text:
        return  # pages show text only
    card = render_to_string(
        LIVE + "#appended",
        {"event": timeline.streaming_view(event_id=event_id, author=author, text=text, event=event)},
    )
    chunk = render_to_string(
        "agents_app/partials/stream_chunk.html", {"dom_id": timeline.event_dom_id(event_id), "text": text}
    )
    message = {"type": "live.partial", "event_id": event_id, "turn_id": turn_id, "card": card, "chunk": chunk}
    await agroup_send_each(_audience_groups(session_pk), message)


def status_html(status: str) -> str:
    """The status chip, rendered once per process per status: it shows nothing else. Not keyed by the
    language: its label is not translated (selectors.SESSION_STATUSES) and nothing activates another
    language; asking Django for it (`get_language`, an asgiref Local) cost each status publish of a
    drain ~2.4 µs, more than the cached chip (bench/README.md, phase 18 (publish)). Key it by
    `get_language()` again if either changes."""
    return _status_html(status)


@functools.lru_cache(maxsize=64)
def _status_html(status: str) -> str:
    return render_to_string(DETAIL + "#status", {"status": status, "oob": "true"})


def publish_status(*, session_pk: int) -> None:
    from . import selectors

    watched = _watched(session_pk)
    if watched:
        status = selectors.session_status(session_pk=session_pk)
        _to_all(session_pk, {"type": "live.status", "html": status_html(status), "status": status}, watched)


async def apublish_status(*, session_pk: int, status: str) -> None:
    """publish_status from async code, with the status its caller just wrote (nothing to read): sent
    to every audience group without asking who watches first (its fragment is rendered once per
    process, and a group with no member takes nothing: adkweb.channel_layers.publish), in its
    caller's batch: one round trip where the question made two, the first of them on a turn's way
    to its first frame (the drain publishes "running" before the turn starts). The layer's counts
    then tell `anotify_session_event` who watches (adkweb.watch_hints.seen_watched)."""
    message = {"type": "live.status", "html": status_html(status), "status": status}
    await agroup_send_each(_audience_groups(session_pk), message)


async def apublish_turn_done(*, session_pk: int, turn_id: int) -> None:
    """publish_turn_finished from async code for a turn that ended well (no error line: nothing to
    read or render): to every audience group, without a question first (as `apublish_status`)."""
    message = {"type": "live.turn_finished", "turn_id": turn_id, "error": ""}
    await agroup_send_each(_audience_groups(session_pk), message)


def publish_turn_finished(*, session_pk: int, turn_id: int, status: str) -> None:
    """A turn ended: pages drop its stale streaming cards; a failed turn shows its error line."""
    from . import selectors

    watched = _watched(session_pk)
    if not watched:
        return
    error = selectors.failed_turn_view(turn_id=turn_id, session_pk=session_pk) if status == "failed" else None

    def payload(context: dict[str, Any]) -> dict[str, Any]:
        html = render_to_string(LIVE + "#appended", {"event": error, **context}) if error is not None else ""
        return {"type": "live.turn_finished", "turn_id": turn_id, "error": html}

    _per_audience(session_pk, payload, uses=("can_retry",) if error is not None else (), watched=watched)


def publish_turn_retried(*, session_pk: int, turn_id: int) -> None:
    """A failed turn runs again: its error line goes."""
    from . import timeline

    html = render_to_string(LIVE + "#gone", {"dom_id": timeline.turn_error_dom_id(turn_id)})
    _to_all(session_pk, {"type": "live.turn_retried", "turn_id": turn_id, "html": html}, _watched(session_pk))


def publish_ticket(*, session_pk: int, ticket_id: int) -> None:
    """A ticket changed: its card in the conversation (pages that show it replace it)."""
    from . import selectors

    watched = _watched(session_pk)
    if not watched:
        return
    ticket = selectors.session_ticket_get(session_pk=session_pk, ticket_id=ticket_id)
    if ticket is None:
        return

    def payload(context: dict[str, Any]) -> dict[str, Any]:
        html = render_to_string(TICKET_CARD, {"ticket": ticket, "oob": "true", **context})
        return {"type": "live.ticket", "ticket_id": ticket_id, "html": html}

    _per_audience(session_pk, payload, watched=watched)
