"""The ids a log line is about (turn, session, ticket), carried by context variables: code that works
on a turn or a ticket wraps itself in `log_ids(turn=...)`, and every line logged inside (in this
thread, its asyncio tasks and the threads asgiref starts for it) ends with `[turn=12 session=3]`.

LOGGING (adkweb.settings) adds the `IdsFilter` to the console handler, whose format is
`time level logger [ids]: message`."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_ids: ContextVar[tuple[tuple[str, object], ...]] = ContextVar("adkweb_log_ids", default=())


@contextmanager
def log_ids(**ids: object) -> Iterator[None]:
    """Add ids (None values are skipped) to every log record made inside the block."""
    current = dict(_ids.get())
    current.update({k: v for k, v in ids.items() if v is not None})
    token = _ids.set(tuple(current.items()))
    try:
        yield
    finally:
        _ids.reset(token)


def current_ids() -> dict[str, object]:
    return dict(_ids.get())


class IdsFilter(logging.Filter):
    """Sets `record.ids` to " [turn=12 ticket=7]" (or "" outside any block) for the formatter."""

    def filter(self, record: logging.LogRecord) -> bool:
        ids = _ids.get()
        record.ids = " [" + " ".join(f"{k}={v}" for k, v in ids) + "]" if ids else ""
        return True
