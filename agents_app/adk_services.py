"""The ADK services every run gets besides sessions: artifacts and memory (ADKWEB_* settings)."""

from __future__ import annotations

import functools
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string


@functools.cache
def _memory_service(choice: str) -> Any:
    if choice in ("", "memory", "in-memory"):
        from google.adk.memory import InMemoryMemoryService

        return InMemoryMemoryService()  # per worker process, as in `adk api_server`
    if choice == "django":
        from .memory import DjangoMemoryService

        return DjangoMemoryService()  # in the database: every process sees the same memory
    return import_string(choice)()


def memory_service() -> Any:
    """ADKWEB_MEMORY_SERVICE: "memory" (ADK's in-memory service, the default), "django" (kept in
    the database), or a dotted path to a BaseMemoryService class or factory (called once per process)."""
    return _memory_service(str(getattr(settings, "ADKWEB_MEMORY_SERVICE", "memory")))


def artifact_service() -> Any:
    """ADK artifacts on Django storage (`default_storage`)."""
    from .artifacts import DjangoStorageArtifactService

    return DjangoStorageArtifactService()
