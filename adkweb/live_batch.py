"""The batch a `batched()` / `abatched()` block collects (adkweb.live): its context variables (the
(group, message) pairs made inside; the groups whose watchers were asked ahead, with the answers; the
groups to ask about with its next question), its start and end, and `ask_also`. Split out of
adkweb.live, which imports them back (its senders and questions read them there).
"""

from __future__ import annotations

import contextvars

_batch: contextvars.ContextVar[list[tuple[str, dict]] | None] = contextvars.ContextVar(
    "adkweb_live_batch", default=None
)
# Inside a `batched()` block, groups whose watchers were asked ahead (`groups_watched_ahead`): the
# answers, so that the publishers it calls do not each wait on the channel layer for their own.
_ahead: contextvars.ContextVar[dict[str, bool] | None] = contextvars.ContextVar("adkweb_live_ahead", default=None)
# Inside an `abatched()` block, groups to ask about with its next question (`ask_also`).
_also: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("adkweb_live_also", default=None)


_Started = tuple[list[tuple[str, dict]], contextvars.Token, contextvars.Token, contextvars.Token]


def _batch_start() -> _Started | None:
    """Open a batch (`batched()`, `abatched()`): None inside another one, which sends what is made."""
    if _batch.get() is not None:
        return None
    pairs: list[tuple[str, dict]] = []
    return pairs, _batch.set(pairs), _ahead.set({}), _also.set([])


def _batch_end(started: _Started) -> list[tuple[str, dict]]:
    """Close the batch; its (group, message) pairs, for its opener to send."""
    pairs, token, ahead, also = started
    _batch.reset(token)
    _ahead.reset(ahead)
    _also.reset(also)
    return pairs


def ask_also(groups: list[str]) -> None:
    """Inside `abatched()`: ask about these groups too with the batch's next question
    (`agroups_watched`), and keep the answers for the rest of the batch, so that a publisher called
    later in it that asks about them (a stored event's hooks' announcements, after the event's own
    publish) pays no round trip of its own. Asked after what the batch announces was committed, as
    every question must be. Nothing happens outside a batch, or if the batch asks nothing more."""
    also = _also.get()
    if also is not None:
        also.extend(g for g in groups if g not in also)
