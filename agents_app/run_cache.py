"""Runners built once per configuration and kept for the event loop that runs them.

Building a turn's `App` (the agent from its configuration rows, its tools, the model object) and
its `Runner` cost more than a short turn's own work (bench/README.md). A worker thread's loop
(agents_app.worker_loop) keeps the runner of each app it has run, with a *stamp* of what it was
built from, and reuses it while the stamp read at the start of each turn is the same:

- an admin-configured agent: its row and the rows of the agents it uses as tools, by content
  (what `agents.build_app` reads, plus `enabled` and `updated_at`: an admin edit, a
  `QuerySet.update()` and a disabled agent all change it), the identity of the registered tools it
  names and the Gemini base URL; read in one query (two per level of agents used as tools);
- a code agent: the identity of the object its dotted path or agents folder gives.

Nothing is shared across loops (a model's HTTP client may be bound to the loop that first used
it). The runner's `App` carries no lease: the lease guard reads the turn's lease from a context
variable (leases.current_lease), which the runner sets per turn. Each turn still records the
configuration version it ran with (read in the same query as the stamp).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection
from google.adk.plugins.base_plugin import BasePlugin

from . import code_apps
from .leases import current_lease
from .models import AgentConfig, AgentConfigVersion, AgentToolLink
from .plugins import BackendFieldsPlugin
from .tools import registry
from .worker_loop import loop_state

FIELDS = ("pk", "name", "description", "model", "instruction", "tools", "generation_settings", "enabled", "updated_at")


class LeaseGuard(BackendFieldsPlugin):
    """The worker's runners' adkweb plugin: BackendFieldsPlugin's, which also stops a run before a
    model or tool call once its turn's lease is known lost (the lease is the context's, set per turn:
    one plugin serves every turn of a cached runner). One plugin where there were two: ADK awaits
    every plugin's every callback (~15 a turn), which cost a worker's turn ~0.1 M instructions for the
    second (bench/README.md, phase 22 (drain))."""

    async def before_model_callback(self, *, callback_context: Any, llm_request: Any) -> None:
        _check()
        return await super().before_model_callback(callback_context=callback_context, llm_request=llm_request)

    async def before_tool_callback(self, **kwargs: Any) -> None:
        _check()
        return await super().before_tool_callback(**kwargs)


def _check() -> None:
    lease = current_lease.get()
    if lease is not None:
        lease.check()


@dataclass(frozen=True)
class _Cached:
    stamp: tuple
    runner: Any


# The stamp's row of one agent configuration: its FIELDS, the id of its latest version, whether it
# uses agents as tools. Written once here rather than built by the ORM each turn (compiling the
# Subquery and Exists cost more CPU than PostgreSQL took to answer); agents_app.turn_sql reads it in
# the statement that claims a turn (`stamp_select`), so a turn whose runner is cached starts without
# another round trip.
_CONFIGS = AgentConfig._meta.db_table
_FIELD_OBJECTS: list[Any] = [AgentConfig._meta.pk if f == "pk" else AgentConfig._meta.get_field(f) for f in FIELDS]
_NUMBERED = list(enumerate(_FIELD_OBJECTS))
_JSON_AT = tuple(i for i, f in _NUMBERED if f.get_internal_type() == "JSONField")
# JSON as text on every connection and database (agents_app.turn_sql reads it on the loop's too, where
# psycopg would decode jsonb): `stamp_row` parses it.
_COLUMNS = ", ".join(f"CAST(a.{f.column} AS text)" if i in _JSON_AT else f"a.{f.column}" for i, f in _NUMBERED)
STAMP_WIDTH = len(FIELDS) + 2


def stamp_select(name_sql: str) -> str:
    """SELECT of the stamp's row (STAMP_WIDTH columns) of the agent whose name is the SQL `name_sql`."""
    versions, links = AgentConfigVersion._meta.db_table, AgentToolLink._meta.db_table
    return (
        f"SELECT {_COLUMNS}, (SELECT v.id FROM {versions} v WHERE v.agent_id = a.id ORDER BY v.version DESC LIMIT 1), "
        f"EXISTS (SELECT 1 FROM {links} l WHERE l.parent_id = a.id) FROM {_CONFIGS} a WHERE a.name = {name_sql}"
    )


_STAMP = stamp_select("%s")


def stamp_row(values: tuple) -> tuple | None:
    """A stamp's row as read by `stamp_select` (raw values: JSON arrives as text), None for no row."""
    if values[0] is None:
        return None
    row = list(values)  # only the JSON columns looked at (a claim's parse: agents_app.turn_sql)
    for i in _JSON_AT:
        if isinstance(value := row[i], (str, bytes)):
            row[i] = json.loads(value)
    return tuple(row)


def read_stamp_row(app_name: str) -> tuple | None:
    with connection.cursor() as cursor:
        cursor.execute(_STAMP, [app_name])
        found = cursor.fetchone()
    return None if found is None else stamp_row(found)


_UNREAD: Any = object()  # config_stamp: the stamp's row is to be read


def config_stamp(app_name: str, row: Any = _UNREAD) -> tuple[tuple | None, int | None]:
    """(stamp, configuration version id) of what `agents.build_app(app_name)` builds now; stamp None
    when no local app has that name (a remote app, or none). `row`: the stamp's row already read
    (`stamp_select`; None: there is none)."""
    try:
        obj = code_apps.load(app_name)
    except code_apps.CodeAppError:
        return ("error",), None  # never matches a cached runner: building says what is wrong
    if obj is not None:
        return ("code", id(obj), _services_stamp()), None
    if row is _UNREAD:
        row = read_stamp_row(app_name)
    if row is None:
        return None, None
    rows = [row[: len(FIELDS)]]
    if row[-1]:
        rows += _linked_rows(row[0], {row[0]})
    tools = tuple(id(registry.get(n)) if n in registry else None for r in rows for n in (r[5] or []))
    return ("config", tuple(rows), tools, settings.GEMINI_BASE_URL, _services_stamp()), row[-2]


def _linked_rows(parent_pk: int, seen: set[int]) -> list[tuple]:
    links = AgentToolLink.objects.filter(parent_id=parent_pk).order_by("id")
    out: list[tuple] = []
    for link in links.values_list("skip_summarization", *(f"child__{f}" for f in FIELDS)):
        out.append(link)
        child = link[1]
        if child not in seen:  # a cycle is refused when building; the stamp just stops there
            out += _linked_rows(child, seen | {child})
    return out


def _services_stamp() -> int:
    from .adk_services import memory_service

    return id(memory_service())  # one per ADKWEB_MEMORY_SERVICE choice and process


def app_for_run(app_name: str, plugin: BasePlugin | None = None) -> Any:
    """The app's ADK `App` (agents.build_app) with adkweb's plugin after the app's own: `plugin`, a
    BackendFieldsPlugin (the default one, or the worker's `LeaseGuard`)."""
    from .agents import build_app

    app = build_app(app_name)
    return app.model_copy(update={"plugins": [*app.plugins, plugin or BackendFieldsPlugin()]})


def run_services() -> dict[str, Any]:
    """The artifact and memory services every run gets (see agents_app.adk_services)."""
    from .adk_services import artifact_service, memory_service

    return {"artifact_service": artifact_service(), "memory_service": memory_service()}


def runner_for(app_name: str, row: Any = _UNREAD) -> tuple[Any, int | None] | None:
    """This loop's runner for the app and the configuration version it runs; None when no local
    app has that name. Builds (and raises what building raises: unknown or disabled agent, bad
    configuration) when the stamp changed. Runs in the loop's database thread. `row`: the stamp's
    row if already read (config_stamp)."""
    stamp, version = config_stamp(app_name, row)
    if stamp is None:
        return None
    cache: dict[str, _Cached] = loop_state().setdefault("runners", {})
    hit = cache.get(app_name)
    if hit is not None and hit.stamp == stamp and stamp[0] != "error":
        return hit.runner, version
    runner = _build(app_name)
    again, version = config_stamp(app_name)
    if again != stamp:  # saved while it was being built: build the newer one
        runner, stamp = _build(app_name), again
    if stamp is not None and stamp[0] != "error":
        cache[app_name] = _Cached(stamp, runner)
    return runner, version


def runner_cached(app_name: str, row: tuple | None) -> tuple[Any, int | None] | None:
    """`runner_for` without the database, from the stamp's row read with the turn's claim: this
    loop's runner and the version it runs when the cached one is current; None when finding out
    takes the database thread (agents used as tools, whose rows are read there), a build, or no
    local app of that name (a remote one, or an error to raise)."""
    if row is not None and row[-1]:
        return None
    stamp, version = config_stamp(app_name, row)
    if stamp is None or stamp[0] == "error":
        return None
    hit = loop_state().get("runners", {}).get(app_name)
    if hit is None or hit.stamp != stamp:
        return None
    return hit.runner, version


def _build(app_name: str) -> Any:
    from google.adk.runners import Runner

    from .session_service import DjangoSessionService

    app = app_for_run(app_name, LeaseGuard())
    return Runner(app=app, app_name=app_name, session_service=DjangoSessionService(), **run_services())


def cached_runners() -> dict[str, Any]:
    """This loop's cached runners by app name (for tests)."""
    return {name: c.runner for name, c in loop_state().get("runners", {}).items()}
