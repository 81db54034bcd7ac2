"""Notifications: events to tell people about, their email and webhook deliveries (each attempt
kept), webhook endpoints, per-user preferences, one-tap approval links and saved inbox views."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import MD5

from agents_app.models import Turn
from approvals.models import PendingCall, Response

from .events import EVENT_CHOICES


class WebhookEndpoint(models.Model):
    """An HTTP endpoint that receives signed JSON POSTs for the events it subscribes to."""

    class Format(models.TextChoices):
        JSON = "json", "JSON (adkweb payload)"
        SLACK = "slack", "Slack incoming webhook (text + blocks)"

    name = models.CharField(max_length=100, blank=True, help_text="Shown on ticket pages instead of the URL.")
    url = models.URLField(max_length=2000)
    secret = models.CharField(max_length=200, help_text="Signs each body: X-Adkweb-Signature: sha256=<HMAC>.")
    events = models.JSONField(default=list, help_text='Event names, e.g. ["ticket.opened", "ticket.decided"].')
    format = models.CharField(max_length=8, choices=Format.choices, default=Format.JSON)
    enabled = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["pk"]
        # One enabled endpoint per URL: two got every event twice (endpoints.webhook_save refuses a second
        # with 409 naming the first; this holds when two are registered at once). On the URL's MD5: an index
        # entry of the URL itself could pass PostgreSQL's limit (a 2,000-character URL of non-ASCII text).
        constraints = [
            models.UniqueConstraint(
                MD5("url"),
                condition=models.Q(enabled=True),
                name="webhook_one_enabled_per_url",
                violation_error_message="Another enabled webhook endpoint has this URL.",
            )
        ]

    def __str__(self) -> str:
        return self.label

    @property
    def label(self) -> str:
        return self.name or f"webhook #{self.pk}"


class NotificationEvent(models.Model):
    """Something to tell people about, recorded in the transaction that caused it (an outbox row)."""

    name = models.CharField(max_length=32, choices=EVENT_CHOICES, db_index=True)
    ticket = models.ForeignKey(PendingCall, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    turn = models.ForeignKey(Turn, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    fanned_out_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} #{self.pk}"


class Delivery(models.Model):
    """One email to one person, or one webhook POST to one endpoint, for one event."""

    class Channel(models.TextChoices):
        EMAIL = "email", "email"
        WEBHOOK = "webhook", "webhook"

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        SENDING = "sending", "sending"
        RETRYING = "retrying", "retrying"
        DELIVERED = "delivered", "delivered"
        FAILED = "failed", "failed"
        SKIPPED = "skipped", "skipped"

    OWED = (Status.PENDING, Status.RETRYING)

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False, help_text="Receivers dedupe on it.")
    event = models.ForeignKey(NotificationEvent, on_delete=models.CASCADE, related_name="deliveries")
    ticket = models.ForeignKey(PendingCall, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    channel = models.CharField(max_length=8, choices=Channel.choices)
    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    endpoint = models.ForeignKey(
        WebhookEndpoint, null=True, blank=True, on_delete=models.SET_NULL, related_name="deliveries"
    )
    role = models.CharField(max_length=16, blank=True, help_text="Why this person: decider or requester.")
    target = models.CharField(max_length=2000, help_text="The email address or URL, as when created.")
    payload = models.JSONField(null=True, blank=True, help_text="Webhooks: the body, identical on every attempt.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING, db_index=True)
    attempts = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=6)
    next_attempt_at = models.DateTimeField(null=True, blank=True, db_index=True)
    last_status_code = models.IntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name_plural = "deliveries"
        constraints = [
            models.UniqueConstraint(
                fields=["event", "recipient"], condition=Q(channel="email"), name="one_email_per_event_and_person"
            ),
            models.UniqueConstraint(
                fields=["event", "endpoint"], condition=Q(channel="webhook"), name="one_post_per_event_and_endpoint"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.channel} {self.event.name} → {self.target} ({self.status})"


class DeliveryAttempt(models.Model):
    """One try of a delivery: what happened, so the ticket page and admin can show each one."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempt_log")
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField(default=0)
    ok = models.BooleanField()
    status_code = models.IntegerField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["delivery", "number"]

    def __str__(self) -> str:
        return f"attempt {self.number} of delivery {self.delivery_id}: {'ok' if self.ok else self.error[:40]}"


class NotificationPreference(models.Model):
    """A person's choices: email on or off, and only tickets routed to their own groups."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    email_enabled = models.BooleanField(default=True, verbose_name="Email me")
    only_my_groups = models.BooleanField(
        default=False, verbose_name="Only tickets of my groups", help_text="Not tickets I see only as a superuser."
    )
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"preferences of {self.user}"


class ApprovalLink(models.Model):
    """A signed one-tap link's server side: bound to a ticket, a person and the arguments shown; single use."""

    key = models.CharField(max_length=43, unique=True, editable=False)
    ticket = models.ForeignKey(PendingCall, on_delete=models.PROTECT, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    args_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    used_action = models.CharField(max_length=8, blank=True)
    response = models.ForeignKey(Response, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"link for {self.user} on ticket {self.ticket_id}"


class SavedView(models.Model):
    """An approver's named inbox filters, shown in the nav."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=40)
    query = models.CharField(max_length=600, blank=True, help_text="The inbox's query string.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "pk"]
        constraints = [models.UniqueConstraint(fields=["user", "name"], name="unique_view_name_per_user")]

    def __str__(self) -> str:
        return self.name
