"""Reads for the agents page: every app (code-defined, admin-configured and remote) as a card, with
each tool's declaration as the model sees it (a remote app's tools live on its server)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .summaries import pretty_json


# -- agents page -------------------------------------------------------------------------------
@dataclass
class ToolParam:
    name: str
    type: str
    required: bool
    description: str


@dataclass
class ToolView:
    name: str
    kind: str = "function"
    long_running: bool = False
    declaration: dict = field(default_factory=dict)
    error: str = ""

    @property
    def description(self) -> str:
        return self.declaration.get("description", "")

    @property
    def params(self) -> list[ToolParam]:
        schema = self.declaration.get("parameters_json_schema") or self.declaration.get("parameters") or {}
        required = set(schema.get("required") or [])
        out = []
        for name, prop in (schema.get("properties") or {}).items():
            kind = prop.get("type") or "/".join(str(a.get("type", "")).lower() for a in prop.get("anyOf", []) if a)
            out.append(ToolParam(name, str(kind or "any").lower(), name in required, prop.get("description", "")))
        return out

    @property
    def raw(self) -> str:
        return pretty_json(self.declaration)


@dataclass
class AgentCard:
    name: str
    description: str
    model: str
    instruction: str
    tools: list[ToolView]
    agent_tools: list[tuple[str, bool]]
    source: str = "configured"  # or "code", or "remote"
    config_id: int | None = None
    enabled: bool = True
    error: str = ""
    server: str = ""  # a remote app's server and app name
    auth: str = ""  # a remote app's auth header: its name, never its value

    @property
    def is_demo_model(self) -> bool:
        from .demo.model import is_demo_model

        return is_demo_model(self.model)


def _registry_tool_view(name: str, cache: dict[str, ToolView]) -> ToolView:
    from .tools import registry

    if name not in cache:
        if name not in registry:
            cache[name] = ToolView(name=name, kind="unknown", error=f"No tool named {name!r} is registered.")
        else:
            tool = registry.get(name)
            try:
                decl = tool.declaration()
            except Exception as exc:  # a tool whose schema ADK cannot build: show why, not a 500
                decl, err = {}, f"ADK could not build this tool's declaration: {exc}"
            else:
                err = ""
            cache[name] = ToolView(
                name=name, kind=tool.kind, long_running=tool.long_running, declaration=decl, error=err
            )
    return cache[name]


def _code_agent_card(name: str, dotted: str) -> AgentCard:
    from . import code_apps
    from .config_tools import code_agent_tool_pauses

    try:
        agent = code_apps.root_agent(code_apps.load(name))
    except Exception as exc:
        return AgentCard(
            name=name,
            description="",
            model="",
            instruction="",
            tools=[],
            agent_tools=[],
            source="code",
            error=str(exc) if isinstance(exc, code_apps.CodeAppError) else f"Cannot load {dotted}: {exc}",
        )
    model = getattr(agent, "model", "")
    instruction = getattr(agent, "instruction", "")
    tools, agent_tools = [], []
    for tool in getattr(agent, "tools", []) or []:
        if hasattr(tool, "agent") and hasattr(tool, "skip_summarization"):  # ADK AgentTool
            agent_tools.append((tool.agent.name, bool(tool.skip_summarization)))
            continue
        decl = tool._get_declaration() if hasattr(tool, "_get_declaration") else None
        long_running = bool(getattr(tool, "is_long_running", False))
        tools.append(
            ToolView(
                name=getattr(tool, "name", getattr(tool, "__name__", str(tool))),
                kind="long-running" if long_running else "function",
                long_running=long_running,
                declaration=decl.model_dump(mode="json", exclude_none=True) if decl else {},
            )
        )
    return AgentCard(
        name=name,
        description=getattr(agent, "description", "") or "",
        model=model if isinstance(model, str) else getattr(model, "model", type(model).__name__),
        instruction=instruction if isinstance(instruction, str) else "(built by code at run time)",
        tools=tools,
        agent_tools=agent_tools,
        source="code",
        error=code_agent_tool_pauses(agent) or "",  # what its turns fail with (agents._code_or_config)
    )


def agent_cards() -> list[AgentCard]:
    """Every agent, code-defined and admin-configured (disabled ones too), with tool declarations."""
    from .agents import code_agents
    from .models import AgentConfig, RemoteApp

    cache: dict[str, ToolView] = {}
    cards = [_code_agent_card(name, dotted) for name, dotted in sorted(code_agents().items())]
    for config in AgentConfig.objects.prefetch_related("agent_tools__child").order_by("name"):
        cards.append(
            AgentCard(
                name=config.name,
                description=config.description,
                model=config.model,
                instruction=config.instruction,
                tools=[_registry_tool_view(t, cache) for t in config.tools or []],
                agent_tools=[
                    (link.child.name, link.skip_summarization)
                    for link in sorted(config.agent_tools.all(), key=lambda link: link.pk)
                ],
                config_id=config.pk,
                enabled=config.enabled,
            )
        )
    cards.extend(_remote_card(remote) for remote in RemoteApp.objects.order_by("name"))
    return cards


def _remote_card(remote: Any) -> AgentCard:
    from .agents import local_app_exists

    shadowed = local_app_exists(remote.name)
    return AgentCard(
        name=remote.name,
        description=remote.description,
        model="",
        instruction="",
        tools=[],
        agent_tools=[],
        source="remote",
        config_id=remote.pk,
        enabled=remote.enabled and not shadowed,
        error=f"An agent named {remote.name!r} runs here too; that one is used." if shadowed else "",
        server=remote.server_label,
        auth=remote.auth_label,
    )
