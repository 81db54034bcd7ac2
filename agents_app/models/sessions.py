"""The ADK session store: sessions, app- and user-scoped state, and the stored events."""

from __future__ import annotations

from django.db import models


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
