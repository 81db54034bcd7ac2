"""ADK artifacts on Django storage: a complete `BaseArtifactService`.

Each version is an `Artifact` row (versions numbered from 0 per name, as ADK's services do) and
its bytes are a file in `default_storage` (local files in embedded mode, any Django storage
backend in production). Names starting with "user:" are user-scoped (shared by the user's
sessions of the app), others belong to one session.
"""

from __future__ import annotations

import uuid
from functools import partial
from typing import Any

from asgiref.sync import sync_to_async
from django.core.exceptions import SuspiciousFileOperation
from django.core.files.base import ContentFile
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils.text import get_valid_filename
from google.adk.artifacts import artifact_util
from google.adk.artifacts.base_artifact_service import ArtifactVersion, BaseArtifactService, ensure_part
from google.adk.errors.input_validation_error import InputValidationError
from google.genai import types

from .models import Artifact

MAX_DEPTH = artifact_util._MAX_ARTIFACT_REFERENCE_DEPTH
STORED_NAME_BYTES = 100  # of the artifact's name in its stored file's name (a file system's holds 255 bytes)


def _fits(field: str, value: str) -> None:
    """Refuse a value longer than its column (PostgreSQL refused it with a DataError: a 500)."""
    limit = getattr(Artifact._meta.get_field(field), "max_length", None)
    if limit is not None and len(value) > limit:
        raise InputValidationError(f"{field} must be at most {limit} characters, not {len(value)}.")


def _scope(app_name: str, user_id: str, filename: str, session_id: str | None) -> dict[str, str]:
    """The row filter for one artifact name; validates the path segments as ADK's services do, and
    their lengths as the columns hold them."""
    artifact_util.validate_path_segment(app_name, "app_name")
    artifact_util.validate_path_segment(user_id, "user_id")
    if not filename or "\x00" in filename:
        raise InputValidationError("filename must not be empty or contain null bytes.")
    for field, value in (("app_name", app_name), ("user_id", user_id), ("filename", filename)):
        _fits(field, value)
    if filename.startswith("user:"):
        return {"app_name": app_name, "user_id": user_id, "session_id": "", "filename": filename}
    if not session_id:
        raise InputValidationError("Session ID must be provided for session-scoped artifacts.")
    artifact_util.validate_path_segment(session_id, "session_id")
    _fits("session_id", session_id)
    return {"app_name": app_name, "user_id": user_id, "session_id": session_id, "filename": filename}


def _stored_name(filename: str) -> str:
    """The stored file's name after its unique prefix: the artifact name's last segment made safe and
    short (the row keeps the whole name). Django refuses a name it cannot make safe ("..", "/"), and a
    file system one of more than 255 bytes: both were 500s."""
    try:
        name = get_valid_filename(filename.rsplit("/", 1)[-1])
    except SuspiciousFileOperation:
        name = ""
    return name.encode()[-STORED_NAME_BYTES:].decode(errors="ignore").lstrip(".") or "artifact"


def _uri(row: Artifact) -> str:
    return artifact_util.get_artifact_uri(
        app_name=row.app_name,
        user_id=row.user_id,
        filename=row.filename,
        version=row.version,
        session_id=row.session_id or None,
    )


def version_of(row: Artifact) -> ArtifactVersion:
    return ArtifactVersion(
        version=row.version,
        canonical_uri=_uri(row),
        custom_metadata=dict(row.custom_metadata or {}),
        create_time=row.created_at.timestamp(),
        mime_type=row.mime_type or None,
    )


def _fill(row: Artifact, part: types.Part, scope: dict[str, str]) -> bytes | None:
    """Set the row's kind and type from the part; the bytes to store, if any."""
    if part.inline_data is not None:
        row.kind, row.mime_type = "inline", part.inline_data.mime_type or "application/octet-stream"
        _fits("mime_type", row.mime_type)
        return part.inline_data.data or b""
    if part.text is not None:
        row.kind, row.mime_type = "text", "text/plain"
        return part.text.encode()
    if part.file_data is not None:
        if artifact_util.is_artifact_ref(part):
            parsed = artifact_util.parse_artifact_uri(part.file_data.file_uri or "")
            if not parsed:
                raise InputValidationError(f"Invalid artifact reference URI: {part.file_data.file_uri}")
            artifact_util.validate_artifact_reference_scope(
                app_name=scope["app_name"],
                user_id=scope["user_id"],
                session_id=scope["session_id"] or None,
                parsed_uri=parsed,
            )
        row.kind, row.mime_type = "file_data", part.file_data.mime_type or ""
        _fits("mime_type", row.mime_type)
        row.file_data = part.file_data.model_dump(mode="json", exclude_none=True)
        return None
    raise InputValidationError("Not supported artifact type.")


def save(*, scope: dict[str, str], part: types.Part, custom_metadata: dict | None) -> int:
    """Store a new version (the next number for this name); retries if another writer took it."""
    for _ in range(5):
        row = Artifact(**scope, custom_metadata=dict(custom_metadata or {}))
        data = _fill(row, part, scope)
        try:
            with transaction.atomic():
                latest = Artifact.objects.filter(**scope).aggregate(v=Max("version"))["v"]
                row.version = 0 if latest is None else latest + 1
                if data is not None:
                    row.size = len(data)
                    row.content.save(
                        f"{uuid.uuid4().hex}-{_stored_name(scope['filename'])}", ContentFile(data), save=False
                    )
                row.save()
            return row.version
        except IntegrityError:
            if row.content:
                row.content.delete(save=False)
    raise InputValidationError(f"Could not store a new version of {scope['filename']!r}: too many writers.")


def row_get(scope: dict[str, str], version: int | None) -> Artifact | None:
    rows = Artifact.objects.filter(**scope)
    return rows.order_by("-version").first() if version is None else rows.filter(version=version).first()


def part_of(row: Artifact) -> types.Part | None:
    """The stored version as the Part it was saved as (None for a rewind tombstone)."""
    if row.kind == "file_data":
        return types.Part(file_data=types.FileData.model_validate(row.file_data or {}))
    with row.content.open("rb") as fh:
        data = fh.read()
    if row.kind == "text":
        return types.Part(text=data.decode())
    part = types.Part(inline_data=types.Blob(mime_type=row.mime_type, data=data))
    return None if artifact_util._is_rewind_tombstone(part) else part


def keys(app_name: str, user_id: str, session_id: str | None) -> list[str]:
    artifact_util.validate_path_segment(app_name, "app_name")
    artifact_util.validate_path_segment(user_id, "user_id")
    sessions = [""] + ([session_id] if session_id else [])
    qs = Artifact.objects.filter(app_name=app_name, user_id=user_id, session_id__in=sessions)
    return sorted(set(qs.values_list("filename", flat=True)))


def _rows(scope: dict[str, str]) -> list[Artifact]:
    return list(Artifact.objects.filter(**scope).order_by("version"))


def _versions(scope: dict[str, str]) -> list[int]:
    return list(Artifact.objects.filter(**scope).order_by("version").values_list("version", flat=True))


@transaction.atomic
def delete(scope: dict[str, str]) -> None:
    for row in Artifact.objects.select_for_update().filter(**scope):
        name, storage = (row.content.name, row.content.storage) if row.content else ("", None)
        row.delete()
        if storage is not None:  # the files go only once the rows are gone for good
            transaction.on_commit(partial(storage.delete, name or ""))


class DjangoStorageArtifactService(BaseArtifactService):
    """ADK's artifact service contract on Django models and `default_storage`."""

    async def save_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        artifact: types.Part | dict[str, Any],
        session_id: str | None = None,
        custom_metadata: dict[str, Any] | None = None,
    ) -> int:
        scope = _scope(app_name, user_id, filename, session_id)
        return await sync_to_async(save)(scope=scope, part=ensure_part(artifact), custom_metadata=custom_metadata)

    async def load_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> types.Part | None:
        return await self._load(app_name, user_id, filename, session_id, version, MAX_DEPTH)

    async def _load(
        self, app_name: str, user_id: str, filename: str, session_id: str | None, version: int | None, depth: int
    ) -> types.Part | None:
        row = await sync_to_async(row_get)(_scope(app_name, user_id, filename, session_id), version)
        if row is None:
            return None
        part = await sync_to_async(part_of)(row)
        if part is not None and part.file_data is not None and artifact_util.is_artifact_ref(part):
            ref = artifact_util.resolve_artifact_reference(
                file_uri=part.file_data.file_uri or "",
                app_name=app_name,
                user_id=user_id,
                session_id=session_id,
                remaining_depth=depth,
            )
            return await self._load(ref.app_name, ref.user_id, ref.filename, ref.session_id, ref.version, depth - 1)
        return part

    async def list_artifact_keys(self, *, app_name: str, user_id: str, session_id: str | None = None) -> list[str]:
        return await sync_to_async(keys)(app_name, user_id, session_id)

    async def delete_artifact(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> None:
        await sync_to_async(delete)(_scope(app_name, user_id, filename, session_id))

    async def list_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[int]:
        scope = _scope(app_name, user_id, filename, session_id)
        return await sync_to_async(_versions)(scope)

    async def list_artifact_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[ArtifactVersion]:
        scope = _scope(app_name, user_id, filename, session_id)
        return [version_of(row) for row in await sync_to_async(_rows)(scope)]

    async def get_artifact_version(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> ArtifactVersion | None:
        row = await sync_to_async(row_get)(_scope(app_name, user_id, filename, session_id), version)
        return version_of(row) if row is not None else None
