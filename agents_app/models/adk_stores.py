"""What ADK's artifact and memory services keep (its sessions are in `sessions`)."""

from __future__ import annotations

from django.db import models


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
