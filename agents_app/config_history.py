"""Agent configuration history: every saved change to an agent is a version row (who, when, what),
and each turn records the version its run was built from."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from .models import AgentConfig, AgentConfigVersion, Turn

FIELDS = ("name", "description", "model", "instruction", "tools", "generation_settings", "enabled")


def config_snapshot(config: AgentConfig) -> dict[str, Any]:
    """What the agent runs with: its fields and the agents it uses as tools."""
    snapshot: dict[str, Any] = {f: getattr(config, f) for f in FIELDS}
    links = config.agent_tools.select_related("child").order_by("child__name")
    snapshot["agent_tools"] = [
        {"agent": link.child.name, "skip_summarization": link.skip_summarization} for link in links
    ]
    return snapshot


@transaction.atomic
def agent_config_record(*, config: AgentConfig, actor: Any = None) -> AgentConfigVersion | None:
    """Record the agent's configuration as saved now, if it differs from its last version (then
    `config.version` is the new version's number). Returns the new version, or None if unchanged.
    Called by everything that saves an agent: the admin, demo_setup."""
    config = AgentConfig.objects.select_for_update().get(pk=config.pk)
    snapshot = config_snapshot(config)
    last = AgentConfigVersion.objects.filter(agent=config).order_by("-version").first()
    if last is not None and last.config == snapshot:
        return None
    number = last.version + 1 if last is not None else max(config.version, 1)
    person = actor if actor is not None and getattr(actor, "is_authenticated", False) else None
    row = AgentConfigVersion.objects.create(
        agent=config,
        agent_name=config.name,
        version=number,
        config=snapshot,
        changed_by=person,
        changed_by_username=person.get_username() if person else "",
    )
    if config.version != number:
        AgentConfig.objects.filter(pk=config.pk).update(version=number)
    return row


def current_version_id(app_name: str) -> int | None:
    """The latest version of an admin-configured agent (None for code agents and remote apps)."""
    return (
        AgentConfigVersion.objects.filter(agent__name=app_name)
        .order_by("-version")
        .values_list("pk", flat=True)
        .first()
    )


def turn_config_record(*, turn_id: int, version_id: int | None) -> None:
    Turn.objects.filter(pk=turn_id).update(config_version_id=version_id)
