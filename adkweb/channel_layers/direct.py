"""Direct delivery, shared by both channel layers.

A layer can hand a message to its consumer directly (`deliver_directly`): a consumer that is idle
(nothing of its queued or being handled) and can act on the message without awaiting anything
(adkweb.live_socket.LiveConsumer: forward a fragment rendered once per audience) does so in the call that
delivers it, instead of the message being put into its queue, waking its task, and going through
Channels' dispatch loop (a task and an `asyncio.wait` per message per socket: most of what a web
process spent per socket per message, bench/README.md). Anything it cannot do at once goes into
its queue as before, and while something is queued or being handled, everything after it is
queued too: the consumer sees its messages in the order they came.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from copy import deepcopy

logger = logging.getLogger(__name__)

# A consumer's direct handler (see the module docstring): True if it took the message, False (having
# changed nothing) to have it queued.
Direct = Callable[[dict], bool]


_FLAT = (str, int, float, bool, type(None))


def receivers_copy(message: dict) -> dict:
    """The message as a receiver in this process gets it, shared with no sender (Channels' `deepcopy`,
    what a trip through Redis gives): a message of flat values (every one a publish sends: a type, pks,
    a status, an event's JSON text) in a shallow copy, ~30x cheaper; anything else deep-copied."""
    if all(type(v) in _FLAT for v in message.values()):
        return dict(message)
    return deepcopy(message)


class DirectDelivery:
    """`deliver_directly` / `stop_delivering_directly`, shared by both layers."""

    _direct: dict[str, tuple[Direct, asyncio.AbstractEventLoop]]

    def deliver_directly(self, channel: str, handler: Direct) -> None:
        """From now on, offer each message for `channel` to `handler` (on this event loop, the one the
        channel is received on) before queueing it: see the module docstring."""
        self._direct[channel] = (handler, asyncio.get_running_loop())

    def stop_delivering_directly(self, channel: str) -> None:
        self._direct.pop(channel, None)

    def _taken(self, channel: str, message: dict, queue: asyncio.Queue | None) -> bool:
        """Whether the channel's direct handler took the message: only with nothing queued before it,
        and on the handler's own loop."""
        direct = self._direct.get(channel)
        if direct is None or (queue is not None and not queue.empty()):
            return False
        handler, loop = direct
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:  # a thread without a loop (embedded mode's sync publishers)
            return False
        if loop is not running:
            return False
        try:
            return handler(message)
        except Exception:  # the handler's own failure: queued, for its consumer's dispatch to meet
            logger.exception("Direct delivery to %s failed; the message is queued instead.", channel)
            return False
