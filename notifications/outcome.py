"""What one delivery attempt came to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Outcome:
    ok: bool
    status_code: int | None = None
    error: str = ""
    skipped: bool = False

    @classmethod
    def fail(cls, error: str, status_code: int | None = None) -> Outcome:
        return cls(ok=False, status_code=status_code, error=error[:2000])

    @classmethod
    def skip(cls, reason: str) -> Outcome:
        """Not sent, on purpose (the ticket closed first, the endpoint was disabled): not retried."""
        return cls(ok=False, error=reason, skipped=True)


def closed_before_sending(ticket: Any) -> str:
    """Why a decider's email about a ticket does not go out once the ticket is closed (a call to act,
    stale once it is decided, expired or cancelled): asked when the email is claimed, and by the
    fan-out of an event whose ticket was closed before it ran (its deciders' rows written skipped)."""
    return f"The ticket was {ticket.get_status_display()} before the email went out."
