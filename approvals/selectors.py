"""Reads on the human side."""

from __future__ import annotations

from .models import PendingCall


def open_ticket_count() -> int:
    return PendingCall.objects.filter(status__in=PendingCall.OPEN_STATUSES).count()
