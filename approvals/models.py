"""Tickets (open human pauses of an agent) and the append-only responses sent to them.

Vocabulary: a pause is a *ticket* in code, UI and API (`ticket` variables, `ticket_*` functions).
The model keeps its first name, `PendingCall` (table `approvals_pendingcall`, API paths
`/api/pending-calls`): renaming a model, its table and its URLs would cost a migration and break
clients for nothing a person sees. `call_id` / `call_name` are the ADK function call's own.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from agents_app.models import AdkSession, StoredEvent, Turn


class PendingCall(models.Model):
    """One human pause: a long-running function call the agent waits on."""

    class Kind(models.TextChoices):
        LONG_RUNNING = "long_running", "long-running tool"
        CONFIRMATION = "confirmation", "tool confirmation"
        INPUT = "input", "request for input"
        CHOICE = "choice", "user choice"
        CREDENTIAL = "credential", "credential"

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        IN_PROGRESS = "in_progress", "in progress"
        APPROVED = "approved", "approved"
        REJECTED = "rejected", "rejected"
        ANSWERED = "answered", "answered"
        EXPIRED = "expired", "expired"
        CANCELLED = "cancelled", "cancelled"

    OPEN_STATUSES = (Status.PENDING, Status.IN_PROGRESS)

    session = models.ForeignKey(AdkSession, on_delete=models.CASCADE, related_name="pending_calls")
    event = models.ForeignKey(StoredEvent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    app_name = models.CharField(max_length=128, db_index=True)
    requester = models.CharField(max_length=128, db_index=True, help_text="The ADK user id of the session.")
    invocation_id = models.CharField(max_length=128, blank=True)
    kind = models.CharField(max_length=16, choices=Kind.choices, db_index=True)
    call_id = models.CharField(max_length=128)
    call_name = models.CharField(max_length=128, db_index=True)
    args = models.JSONField(default=dict, blank=True)
    initial_response = models.JSONField(null=True, blank=True)
    # Confirmation tickets: what will run if approved.
    tool_name = models.CharField(
        max_length=128, blank=True, db_index=True, help_text="The tool the human is deciding on."
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    assigned_to = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="assigned_calls"
    )
    due_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    closed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="closed_calls"
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["session", "call_id"], name="unique_call_per_session")]
        indexes = [models.Index(fields=["status", "-created_at"])]
        permissions = [("decide_tickets", "Can answer every ticket (approvers)")]

    def __str__(self) -> str:
        return f"#{self.pk} {self.tool_name or self.call_name} ({self.status})"

    @property
    def is_open(self) -> bool:
        return self.status in self.OPEN_STATUSES

    @property
    def is_closed(self) -> bool:
        return not self.is_open

    @property
    def original_call(self) -> dict:
        return (self.args or {}).get("originalFunctionCall") or {}

    @property
    def hint(self) -> str:
        return ((self.args or {}).get("toolConfirmation") or {}).get("hint", "")

    @property
    def response_schema(self) -> dict | None:
        return (self.args or {}).get("response_schema") if self.kind == self.Kind.INPUT else None


class Response(models.Model):
    """Append-only: one function response sent to a ticket, and who sent it."""

    class Action(models.TextChoices):
        APPROVE = "approve", "approve"
        REJECT = "reject", "reject"
        UPDATE = "update", "update"
        CUSTOM = "custom", "custom response"

    pending_call = models.ForeignKey(PendingCall, on_delete=models.CASCADE, related_name="responses")
    action = models.CharField(max_length=16, choices=Action.choices, default=Action.CUSTOM)
    payload = models.JSONField()
    final = models.BooleanField()
    comment = models.TextField(blank=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    turn = models.ForeignKey(Turn, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.action} on ticket {self.pending_call_id} ({'final' if self.final else 'update'})"
