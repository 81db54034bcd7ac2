"""Channel layers: an in-memory one that is safe to send to from other threads (embedded mode,
`memory`), and channels_redis's with one reader per process and a process's group memberships kept
in its memory (services mode, `redis_layer`): a group message reaches a web process once, whatever
its number of sockets. Both can hand a message to its consumer directly (`direct`). Settings name
the layers from here.
"""

from .direct import Direct, DirectDelivery
from .memory import ThreadSafeInMemoryChannelLayer
from .redis_layer import RedisChannelLayer, cancel_safe

__all__ = ["Direct", "DirectDelivery", "RedisChannelLayer", "ThreadSafeInMemoryChannelLayer", "cancel_safe"]
