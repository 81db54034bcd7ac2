"""The notification events (named in adkweb.notify, where other apps find them) and who hears each."""

from __future__ import annotations

from adkweb.notify import (
    EVENTS,
    TICKET_DECIDED,
    TICKET_ESCALATED,
    TICKET_EXPIRED,
    TICKET_OPENED,
    TICKET_REMINDER,
)

EVENT_CHOICES = [(e, e) for e in EVENTS]
# Webhooks may subscribe to any event (ticket.reminder and ticket.escalated come from policies).
WEBHOOK_EVENTS = EVENTS
# Emailed to the ticket's eligible deciders (with one-tap links) ...
EMAIL_DECIDERS = (TICKET_OPENED, TICKET_REMINDER, TICKET_ESCALATED)
# ... and to the requester whose ticket it is.
EMAIL_REQUESTER = (TICKET_DECIDED, TICKET_EXPIRED)
