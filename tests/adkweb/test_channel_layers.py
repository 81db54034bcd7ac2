"""The in-memory channel layer of embedded mode (adkweb.channel_layers.ThreadSafeInMemoryChannelLayer):
its direct delivery to consumers (the Redis layer's is tested in tests/integration)."""

from __future__ import annotations

from adkweb.channel_layers import ThreadSafeInMemoryChannelLayer
from tests.frames import direct_delivery_contract


async def test_direct_delivery_takes_or_queues_in_order():
    await direct_delivery_contract(ThreadSafeInMemoryChannelLayer())
