"""ADK memory on Django models (`ADKWEB_MEMORY_SERVICE=django`): what ADK's in-memory service does
(keyword search over the events of the user's sessions, the ten best matches), kept in the
database so that every worker process and every restart sees the same memory."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction
from google.adk.memory import _utils
from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.in_memory_memory_service import _extract_searchable_words, _extract_words_lower
from google.adk.memory.memory_entry import MemoryEntry
from google.genai import types

from .models import MemoryItem

UNKNOWN_SESSION = "__unknown_session_id__"
MAX_RESULTS = 10


def _rows(app_name: str, user_id: str, session_id: str, events: Sequence[Any], meta: Mapping | None) -> list:
    return [
        MemoryItem(
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            event_id=e.id,
            author=e.author or "",
            timestamp=e.timestamp,
            content=e.content.model_dump(mode="json", exclude_none=True),
            custom_metadata=dict(meta or {}),
        )
        for e in events
        if e.content and e.content.parts
    ]


@transaction.atomic
def session_replace(app_name: str, user_id: str, session_id: str, events: Sequence[Any]) -> None:
    """A session's memories become its events with content now (deleted ones stay deleted)."""
    mine = MemoryItem.objects.filter(app_name=app_name, user_id=user_id)
    tombstones = set(mine.filter(deleted=True).values_list("event_id", flat=True))
    mine.filter(session_id=session_id, deleted=False).delete()
    rows = [r for r in _rows(app_name, user_id, session_id, events, None) if r.event_id not in tombstones]
    MemoryItem.objects.bulk_create(rows, ignore_conflicts=True)


def events_add(app_name: str, user_id: str, session_id: str, events: Sequence[Any], meta: Mapping | None) -> None:
    """New events of one session only: one already kept there (or deleted) is left as it is."""
    mine = MemoryItem.objects.filter(app_name=app_name, user_id=user_id)
    tombstones = set(mine.filter(deleted=True).values_list("event_id", flat=True))
    rows = [r for r in _rows(app_name, user_id, session_id, events, meta) if r.event_id not in tombstones]
    MemoryItem.objects.bulk_create(rows, ignore_conflicts=True)


def search(app_name: str, user_id: str, query: str) -> list[MemoryEntry]:
    wanted = _extract_words_lower(query)
    scored: list[tuple[int, MemoryEntry]] = []
    for row in MemoryItem.objects.filter(app_name=app_name, user_id=user_id, deleted=False).order_by("id"):
        content = types.Content.model_validate(row.content)
        text = " ".join(p.text for p in content.parts or [] if p.text)
        words = _extract_searchable_words(text)
        matched = sum(1 for w in wanted if w in words or (not w.isascii() and w in text.lower()))
        if matched:
            entry = MemoryEntry(
                id=row.event_id,
                content=content,
                author=row.author or None,
                timestamp=_utils.format_timestamp(row.timestamp),
                custom_metadata=dict(row.custom_metadata or {}),
            )
            scored.append((matched, entry))
    scored.sort(key=lambda item: -item[0])  # stable: equal matches keep their order
    return [entry for _, entry in scored[:MAX_RESULTS]]


class DjangoMemoryService(BaseMemoryService):
    """ADK's memory service contract on `MemoryItem` rows."""

    async def add_session_to_memory(self, session: Any) -> None:
        await sync_to_async(session_replace)(session.app_name, session.user_id, session.id, list(session.events))

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Any],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        await sync_to_async(events_add)(app_name, user_id, session_id or UNKNOWN_SESSION, list(events), custom_metadata)

    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        return SearchMemoryResponse(memories=await sync_to_async(search)(app_name, user_id, query))

    async def delete_memory(self, *, app_name: str, user_id: str, memory_id: str | None = None) -> None:
        if memory_id:
            await sync_to_async(
                MemoryItem.objects.filter(app_name=app_name, user_id=user_id, event_id=memory_id).update
            )(deleted=True)
