"""Who watches: this process's memory of the channel layer's answers about which groups have members.

Every count the layer answers (a batch's sends and questions: adkweb.live, adkweb.channel_layers.publish)
is noted here, so that a publisher can skip a round trip it would very likely waste. Only hints: a
publisher that goes by them still sends what it must (see each function).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

# Groups the channel layer last said have members, and since when (monotonic), in this process: every
# count it answers (a batch's sends and questions, adkweb.channel_layers.publish) is noted, a group
# counted empty is dropped. Only ever wrong towards "watched" (a page closed since the last answer):
# a publisher that trusts it renders once for nobody, and the send that follows, counted, corrects it.
SEEN_FOR = 60.0  # seconds an answer "watched" is trusted without a new one
SEEN_MAX = 4096  # groups remembered (the oldest answers go first)
_seen: dict[str, float] = {}
_seen_lock = threading.Lock()  # a worker's drain threads share the process
# Groups counted empty by the reply to a batch this process sent (waited for or not), and when that
# batch was sent (monotonic): Redis counted them after that moment. Dropped by any later answer for the
# group, so only ever wrong towards "not known empty" (`counted_empty_since`).
_empty: dict[str, float] = {}
# `counted_empty_lately`'s moment: an API client's next turn after its /run answered comes within it (ms);
# a page opened, then a click that queues a turn, does not (a person's seconds; bench/fanout_resume.py's
# click comes 0.5 s after its page settles): a page opened inside it would pay a round trip on the turn's
# first frame (agents_app.events.ask_ahead).
EMPTY_LATELY = 0.25


def note(counts: Mapping[str, int], sent_at: float | None = None) -> None:
    """The channel layer's member counts per group, from the reply to a batch sent at `sent_at` (monotonic)."""
    now = time.monotonic()
    with _seen_lock:
        for group, members in counts.items():
            _seen.pop(group, None)
            _empty.pop(group, None)
            if members:
                _seen[group] = now  # the newest answers last
            elif sent_at is not None:
                _empty[group] = sent_at
        while len(_seen) > SEEN_MAX:
            del _seen[next(iter(_seen))]
        while len(_empty) > SEEN_MAX:
            del _empty[next(iter(_empty))]


def counted_empty_since(group: str, since: float) -> bool:
    """Whether the channel layer's last answer for `group` in this process counted it without members,
    for a batch sent after `since` (monotonic). False says nothing (no such answer, or a member since).
    A hint only: the replies of batches sent on different connections may arrive out of order, so an
    older batch's "empty" may follow a newer one's "member"; its users only ever do a round trip's
    work more or later for it (agents_app.events: ask_ahead, anotify_turn_ended), never drop a message."""
    return _empty.get(group, since) > since


def counted_empty_lately(groups: list[str]) -> bool:
    """Whether every one of these groups was counted without members by a batch this process sent within
    the last EMPTY_LATELY seconds (and no answer since said otherwise). Only a hint that asking again now
    would very likely hear "nobody": a page may have opened since, so a publisher must still ask with
    what it sends (as a turn's events' batches do), never drop a message for it."""
    since = time.monotonic() - EMPTY_LATELY
    return bool(groups) and all(counted_empty_since(g, since) for g in groups)


def seen_watched(groups: list[str]) -> bool:
    """Whether the channel layer's last answer for any of these groups, in this process and within
    SEEN_FOR seconds, was that it has members (no round trip: see `_seen`). False says nothing: ask
    (`adkweb.live.agroups_watched`). A publisher that goes by True must send to every one of `groups`, as if all
    were watched: a group counted empty before may have a member now."""
    since = time.monotonic() - SEEN_FOR
    return any(_seen.get(g, since) > since for g in groups)
