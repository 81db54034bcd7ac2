"""Reads of a conversation's artifacts (the files its agents saved, ADK's artifact service rows): the
list the conversation page and its socket show, and one version to download. Split out of
`agents_app.selectors`, which imports them back (views and the fan-out read them there).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q

from .models import AdkSession, Artifact

PREVIEW_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}  # raster only: SVG can carry script


@dataclass
class ArtifactView:
    """An artifact of a conversation: its latest version, and how many there are."""

    filename: str
    latest: Artifact
    versions: int

    @property
    def previewable(self) -> bool:
        return self.latest.kind == "inline" and self.latest.mime_type in PREVIEW_TYPES


def _artifact_scope(session: AdkSession) -> Q:
    mine = Q(app_name=session.app_name, user_id=session.user_id)
    return mine & (Q(session_id=session.session_id) | Q(session_id=""))


def session_artifacts(*, session: AdkSession) -> list[ArtifactView]:
    """The conversation's artifacts (and its user's "user:" ones), by name, latest version first."""
    rows = Artifact.objects.filter(_artifact_scope(session)).order_by("filename", "-version")
    out: dict[str, ArtifactView] = {}
    for row in rows:
        if row.filename in out:
            out[row.filename].versions += 1
        else:
            out[row.filename] = ArtifactView(filename=row.filename, latest=row, versions=1)
    return list(out.values())


def session_artifact_get(*, session: AdkSession, filename: str, version: int | None) -> Artifact | None:
    rows = Artifact.objects.filter(_artifact_scope(session), filename=filename)
    if filename.startswith("user:"):
        rows = rows.filter(session_id="")
    else:
        rows = rows.filter(session_id=session.session_id)
    return rows.order_by("-version").first() if version is None else rows.filter(version=version).first()
