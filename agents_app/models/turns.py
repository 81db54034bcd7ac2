"""The per-session inbox of turns: work owed to a session, run oldest first."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

from adkweb import compiled

from .agents import AgentConfigVersion
from .sessions import AdkSession


class Turn(models.Model):
    """Work owed to a session: a user message or function responses, run oldest first."""

    class Kind(models.TextChoices):
        MESSAGE = "message", "message"
        FUNCTION_RESPONSE = "function_response", "function response"

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        DONE = "done", "done"
        FAILED = "failed", "failed"

    # No index of its own: (session, status, id) below leads with it (0014_turn_redundant_indexes).
    session = models.ForeignKey(AdkSession, on_delete=models.PROTECT, related_name="turns", db_index=False)
    kind = models.CharField(max_length=32, choices=Kind.choices)
    content = models.JSONField(help_text="google.genai.types.Content as JSON.")
    state_delta = models.JSONField(null=True, blank=True)
    streaming = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    attempts = models.PositiveSmallIntegerField(default=0)
    # Set with the turn's first stored event: a run cut short resumes this ADK invocation.
    invocation_id = models.CharField(max_length=128, blank=True, default="")
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    # The agent configuration its run was built from (admin-configured agents; None for code agents).
    config_version = models.ForeignKey(
        AgentConfigVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["session", "status", "id"]),  # every read of a session's turns
            # Queued and running turns across sessions: the sweeper, /metrics' oldest queued turn (a plain
            # index: db_index would add a varchar_pattern_ops copy for LIKE, which no query asks of a status).
            models.Index(fields=["status"], name="turn_status"),
            # /metrics' turn durations read the turns that finished lately (agents_app.metrics).
            models.Index(fields=["finished_at"], name="turn_finished_at"),
        ]

    def __str__(self) -> str:
        return f"turn {self.pk} ({self.kind}, {self.status})"

    @staticmethod
    def owed(session_pk: int) -> bool:
        """Whether the session has a turn still queued: a drain that ends hands it on (a wake-up)."""
        return compiled.exists_by_pk(("turn_owed",), _queued, session_pk)  # every drain's end asks it

    _loaded_status: str | None = None  # the status as read from the database (agents_app.session_status)

    @classmethod
    def from_db(cls, db: Any, field_names: Any, values: Any, **kwargs: Any) -> Turn:
        turn = super().from_db(db, field_names, values, **kwargs)
        turn._loaded_status = turn.__dict__.get("status")  # agents_app.session_status: what changed
        return turn


def _queued(session_pk: int) -> models.QuerySet:
    return Turn.objects.filter(session_id=session_pk, status=Turn.Status.QUEUED)
