"""Agent configuration, the ADK session store, and the per-session inbox of turns."""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from adkweb import compiled

AGENT_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def validate_agent_name(value: str) -> None:
    if not AGENT_NAME_RE.match(value) or value == "user":
        raise ValidationError(
            "An agent name must be a Python identifier (letters, digits, underscores) and not 'user'."
        )


class AgentConfig(models.Model):
    """An agent configured by an admin; built into an ADK LlmAgent at run time."""

    name = models.CharField(max_length=100, unique=True, validators=[validate_agent_name])
    description = models.TextField(blank=True)
    model = models.CharField(max_length=100, default="demo-offline")
    instruction = models.TextField(blank=True)
    tools = models.JSONField(default=list, blank=True, help_text="Tool names from the code registry.")
    generation_settings = models.JSONField(
        default=dict, blank=True, help_text='e.g. {"temperature": 0.2, "max_output_tokens": 1024}'
    )
    enabled = models.BooleanField(default=True)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class AgentConfigVersion(models.Model):
    """One version of an agent's configuration as it was saved (model, instruction, tools, settings,
    agents used as tools), with who saved it and when: kept forever, so a past turn's configuration
    can always be read (Turn.config_version)."""

    agent = models.ForeignKey(
        AgentConfig, null=True, blank=True, on_delete=models.SET_NULL, related_name="versions", editable=False
    )
    agent_name = models.CharField(max_length=100, db_index=True, editable=False, help_text="The agent's name then.")
    version = models.PositiveIntegerField(editable=False)
    config = models.JSONField(editable=False)
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )
    changed_by_username = models.CharField(max_length=150, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["agent_name", "-version"]
        constraints = [models.UniqueConstraint(fields=["agent", "version"], name="unique_agent_config_version")]

    def __str__(self) -> str:
        return f"{self.agent_name} v{self.version}"


class AgentToolLink(models.Model):
    """Another agent used as a tool (ADK AgentTool) by `parent`."""

    parent = models.ForeignKey(AgentConfig, on_delete=models.CASCADE, related_name="agent_tools")
    child = models.ForeignKey(AgentConfig, on_delete=models.PROTECT, related_name="used_by")
    skip_summarization = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["parent", "child"], name="unique_agent_tool")]

    def __str__(self) -> str:
        return f"{self.parent} → {self.child}"

    def clean(self) -> None:
        if self.parent_id and self.parent_id == self.child_id:
            raise ValidationError("An agent cannot use itself as a tool.")


class ActiveSessions(models.Manager["AdkSession"]):
    """Sessions not archived: what ADK's API, the pages and the admin see."""

    def get_queryset(self) -> models.QuerySet[AdkSession]:
        return super().get_queryset().filter(archived_at__isnull=True)


class AdkSession(models.Model):
    """An ADK session: identity, session-scoped state and the store's revision counter.

    Never deleted: "deleting" one archives it (`archived_at`), so it is gone from ADK's API and
    the pages while its events, turns, tickets and responses stay for the audit trail. `objects`
    sees live sessions only; `all_objects` every one (related access, e.g. `ticket.session`, too).
    """

    app_name = models.CharField(max_length=128)
    user_id = models.CharField(max_length=128)
    session_id = models.CharField(max_length=128)
    state = models.JSONField(default=dict)
    create_time = models.FloatField()
    update_time = models.FloatField(db_index=True)
    revision = models.PositiveBigIntegerField(default=0)
    # The per-session run lease: one agent run at a time, across every worker.
    lease_owner = models.CharField(max_length=64, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # running / waiting / failed / idle, from its turns and tickets: kept by agents_app.session_status.
    status = models.CharField(max_length=16, default="idle", db_default="idle", editable=False)
    archived_at = models.DateTimeField(null=True, blank=True, db_index=True)
    archived_by = models.CharField(max_length=150, blank=True, default="", help_text="Who deleted it (username).")

    objects = ActiveSessions()
    all_objects = models.Manager()  # noqa: DJ012  (a manager, after the default one)

    class Meta:
        base_manager_name = "all_objects"
        constraints = [
            # One live session per ADK identity: ADK may create a session again with a deleted one's id.
            models.UniqueConstraint(
                fields=["app_name", "user_id", "session_id"],
                condition=models.Q(archived_at__isnull=True),
                name="unique_live_adk_session",
            )
        ]
        # The conversation lists' orderings (newest activity first), with and without a status filter.
        indexes = [
            models.Index(fields=["app_name", "update_time"]),
            models.Index(fields=["-update_time", "-id"], name="session_recent"),
            models.Index(fields=["status", "-update_time", "-id"], name="session_status_recent"),
            models.Index(fields=["app_name", "user_id", "session_id"], name="adk_session_identity"),
        ]
        permissions = [("view_all_sessions", "Can watch every conversation (staff observers)")]

    def __str__(self) -> str:
        return f"{self.app_name}/{self.user_id}/{self.session_id}"


class AppState(models.Model):
    app_name = models.CharField(max_length=128, unique=True)
    state = models.JSONField(default=dict)
    update_time = models.FloatField(default=0)

    def __str__(self) -> str:
        return f"app state of {self.app_name}"


class UserState(models.Model):
    app_name = models.CharField(max_length=128)
    user_id = models.CharField(max_length=128)
    state = models.JSONField(default=dict)
    update_time = models.FloatField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["app_name", "user_id"], name="unique_user_state")]

    def __str__(self) -> str:
        return f"user state of {self.user_id} in {self.app_name}"


class StoredEvent(models.Model):
    """One persisted ADK event: the full JSON plus denormalised columns for queries."""

    session = models.ForeignKey(AdkSession, on_delete=models.PROTECT, related_name="events")
    event_id = models.CharField(max_length=128)
    invocation_id = models.CharField(max_length=128, blank=True, db_index=True)
    author = models.CharField(max_length=128, blank=True)
    timestamp = models.FloatField()
    data = models.JSONField()
    interrupt_ids = models.JSONField(default=list, blank=True)
    response_ids = models.JSONField(default=list, blank=True)
    turn = models.ForeignKey("Turn", null=True, blank=True, on_delete=models.SET_NULL, related_name="events")

    class Meta:
        # Append order: ADK appends some events out of timestamp order (tool confirmation).
        ordering = ["id"]
        indexes = [models.Index(fields=["session", "id"]), models.Index(fields=["session", "timestamp"])]

    def __str__(self) -> str:
        return f"{self.author or 'event'} {self.event_id}"


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

    session = models.ForeignKey(AdkSession, on_delete=models.PROTECT, related_name="turns")
    kind = models.CharField(max_length=32, choices=Kind.choices)
    content = models.JSONField(help_text="google.genai.types.Content as JSON.")
    state_delta = models.JSONField(null=True, blank=True)
    streaming = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
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
            models.Index(fields=["session", "status", "id"]),
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


class ApiToken(models.Model):
    """A per-user API key for `Authorization: Token <key>`. Only a SHA-256 of the key is stored:
    the key itself is shown once, when it is created."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True, help_text="What this token is for (e.g. 'billing system').")
    prefix = models.CharField(max_length=16, db_index=True, editable=False, help_text="The key's first characters.")
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, help_text="Set to revoke the token.")

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


def artifact_upload_to(instance: Artifact, filename: str) -> str:
    scope = instance.session_id or "user"
    return f"adk-artifacts/{instance.app_name}/{instance.user_id}/{scope}/{instance.pk or 'new'}-{filename}"


class Artifact(models.Model):
    """One version of an ADK artifact (`save_artifact` in a tool, or the API); the bytes live in
    Django's default storage. session_id is "" for user-scoped ("user:" names) artifacts."""

    app_name = models.CharField(max_length=128)
    user_id = models.CharField(max_length=128)
    session_id = models.CharField(max_length=128, blank=True)
    filename = models.CharField(max_length=512)
    version = models.PositiveIntegerField()
    mime_type = models.CharField(max_length=255, blank=True)
    kind = models.CharField(max_length=16)  # "inline", "text" or "file_data" (a reference, no bytes)
    content = models.FileField(upload_to=artifact_upload_to, blank=True, max_length=1024)
    size = models.PositiveBigIntegerField(default=0)
    file_data = models.JSONField(null=True, blank=True)
    custom_metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["app_name", "user_id", "session_id", "filename", "version"], name="unique_artifact_version"
            )
        ]
        indexes = [models.Index(fields=["app_name", "user_id", "session_id", "filename"])]

    def __str__(self) -> str:
        return f"{self.filename} v{self.version}"


class MemoryItem(models.Model):
    """One event kept in ADK memory (`ADKWEB_MEMORY_SERVICE=django`), searchable by the user's later
    sessions of the app. A deleted memory stays as a tombstone so it is not added again."""

    app_name = models.CharField(max_length=128)
    user_id = models.CharField(max_length=128)
    session_id = models.CharField(max_length=128)
    event_id = models.CharField(max_length=128)
    author = models.CharField(max_length=256, blank=True)
    timestamp = models.FloatField()
    content = models.JSONField(help_text="google.genai.types.Content as JSON.")
    custom_metadata = models.JSONField(default=dict, blank=True)
    deleted = models.BooleanField(default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["app_name", "user_id", "session_id", "event_id"], name="unique_memory_event"
            )
        ]
        indexes = [models.Index(fields=["app_name", "user_id", "session_id"])]

    def __str__(self) -> str:
        return f"memory {self.event_id} of {self.user_id}"


class IdempotencyKey(models.Model):
    """A client's `Idempotency-Key` and the answer it got: a retry with that key gets the same answer."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    endpoint = models.CharField(max_length=300, help_text="Method and path the key was used on.")
    request_hash = models.CharField(max_length=64, help_text="SHA-256 of the endpoint and the request body.")
    status_code = models.PositiveSmallIntegerField(default=0)
    response = models.JSONField(null=True, blank=True)
    turn = models.ForeignKey(Turn, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="unique_idempotency_key_per_user")]

    def __str__(self) -> str:
        return f"{self.key} ({self.endpoint})"


from .remote_models import RemoteApp, RemoteSession  # noqa: E402,F401  (remote apps: models of this app, kept apart)
