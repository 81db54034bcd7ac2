"""Sending live updates to Channels groups, from sync code (services, after commit) or async code.

Each app's `events.py` names its groups and typed payloads and calls these; consumers render.
Sends never raise: a live update is a courtesy and the database is the truth (pages catch up when
they reconnect), while the caller has already committed what it announces (a decision answered
500 after it was saved, or a run cut short by a lost streaming chunk, would be worse).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

logger = logging.getLogger(__name__)


def group_send(group: str, message: Mapping[str, object]) -> None:
    try:
        layer = get_channel_layer()
        if layer is not None:
            async_to_sync(layer.group_send)(group, dict(message))
    except Exception:  # Redis down, channel full, ...
        logger.warning("Could not publish %s to %s; pages catch up when they reconnect.", message.get("type"), group)


async def agroup_send(group: str, message: Mapping[str, object]) -> None:
    try:
        layer = get_channel_layer()
        if layer is not None:
            await layer.group_send(group, dict(message))
    except Exception:
        logger.warning("Could not publish %s to %s; pages catch up when they reconnect.", message.get("type"), group)
