"""What a channel layer says of who watches its groups (adkweb.live): asked of each kind of layer
(`_awatched`: adkweb's Redis layer in one round trip, channels_redis, Channels' in-memory layer), and
noted from the reply of a batch sent without waiting (`_replied`); both note the counts for
adkweb.watch_hints. Split out of adkweb.live, which imports them back (its questions call `_awatched`
there, where tests patch it; tests call `_replied` there).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

from adkweb.watch_hints import note

logger = logging.getLogger("adkweb.live")  # the log name, as before the split


def _replied(reply: Mapping[str, int] | BaseException, sent_at: float | None = None) -> None:
    """The reply of a batch sent without waiting (`_agroup_send_many(soon=True)`), sent at `sent_at`."""
    if isinstance(reply, BaseException):
        logger.warning("Could not publish live updates (%s); pages catch up when they reconnect.", type(reply).__name__)
    else:
        note(reply, sent_at)


async def _awatched(layer: Any, groups: list[str]) -> set[str]:
    send_many = getattr(layer, "group_send_many", None)
    if send_many is not None:  # adkweb's Redis layer: one round trip for all the groups
        sent_at = time.monotonic()
        counts = await send_many([], groups)
        note(counts, sent_at)
        return {g for g in groups if counts.get(g)}
    if hasattr(layer, "_group_key") and hasattr(layer, "consistent_hash"):  # channels_redis
        counts = await asyncio.gather(
            *(layer.connection(layer.consistent_hash(g)).zcard(layer._group_key(g)) for g in groups)
        )
        return {g for g, n in zip(groups, counts, strict=True) if n}
    members = getattr(layer, "groups", None)  # Channels' in-memory layer
    if isinstance(members, dict):
        return {g for g in groups if members.get(g)}
    return set(groups)
