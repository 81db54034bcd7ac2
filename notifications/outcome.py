"""What one delivery attempt came to."""

from __future__ import annotations

from dataclasses import dataclass


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
