"""What happened to tickets besides their responses, and the head of the chain every decision is linked into."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.template.defaultfilters import truncatechars

from .people import person_label
from .tickets import PendingCall, Response

MESSAGE_MAX = 500  # TicketActivity.message's column


class TicketActivity(models.Model):
    """Append-only history of what happened to a ticket besides its responses: the rules it got,
    reminders, escalations, edits, grants. `actor_username`: the actor's, written with the entry (save)."""

    class Kind(models.TextChoices):
        POLICY = "policy", "rules applied"
        REMINDED = "reminded", "reminder"
        ESCALATED = "escalated", "escalated"
        EDITED = "edited", "arguments edited"
        GRANTED = "granted", "standing grant given"
        EXPIRED = "expired", "expired"
        CANCELLED = "cancelled", "cancelled"
        GIVEN_BACK = "given_back", "given back"

    ticket = models.ForeignKey(PendingCall, on_delete=models.PROTECT, related_name="activities")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_username = models.CharField(max_length=150, blank=True, db_default="", editable=False)  # kept if deleted
    message = models.CharField(max_length=MESSAGE_MAX)
    detail = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name_plural = "ticket activities"

    def __str__(self) -> str:
        return f"{self.kind} on ticket {self.ticket_id}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        """The line is built from what people wrote (an approver's edited arguments, policy and group
        names): cut to the column (PostgreSQL refused a longer one, a 500); `detail` keeps it whole."""
        self.message = truncatechars(self.message, MESSAGE_MAX)
        kept = self.actor_username  # a new entry's: the column's default (DatabaseDefault) unless given
        actor = self.actor if self.actor_id is not None else None
        if actor is not None and not (isinstance(kept, str) and kept):
            self.actor_username = actor.get_username()
        super().save(*args, **kwargs)

    @property
    def actor_label(self) -> str:
        """Who did it, as pages show them (approvals.models.tickets.person_label)."""
        return person_label(self, "actor")


class DecisionChain(models.Model):
    """The head of the decision chain (one row): locked while a decision is linked, so concurrent
    decisions still form one chain; its length and last hash also show a truncated tail."""

    length = models.PositiveBigIntegerField(default=0)
    last_hash = models.CharField(max_length=64, default="")
    last_response = models.ForeignKey(Response, null=True, blank=True, on_delete=models.PROTECT, related_name="+")

    def __str__(self) -> str:
        return f"decision chain ({self.length} decisions)"
