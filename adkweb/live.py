"""Sending live updates to Channels groups, from sync code (services, after commit) or async code.

Each app's `events.py` names its groups and typed payloads and calls these; consumers render.
"""

from __future__ import annotations

from collections.abc import Mapping

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer


def group_send(group: str, message: Mapping[str, object]) -> None:
    layer = get_channel_layer()
    if layer is not None:
        async_to_sync(layer.group_send)(group, dict(message))


async def agroup_send(group: str, message: Mapping[str, object]) -> None:
    layer = get_channel_layer()
    if layer is not None:
        await layer.group_send(group, dict(message))
