"""Build ADK agents: admin-configured AgentConfig rows and code-defined agents from settings.

Those are "apps" to the rest of the system (the app name is the root agent's name), and so are
remote apps (`RemoteApp` rows: agents served by other ADK servers), which are listed here but run
by `agents_app.remote`, never built.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db.models import JSONField, QuerySet, Value

from adkweb import compiled
from adkweb.errors import NotFound

from . import code_apps
from .config_tools import (
    agent_tree,
    code_agent_tool_pauses,
    configured_without_tool,  # noqa: F401 - what approvals asks (its public module)
    is_agent_tool,
    pausing_refusal,
    pausing_tools,
)
from .models import AgentConfig, RemoteApp
from .tools import registry

REJECTED_ERROR = "This tool call is rejected."


class AgentNotFound(NotFound):
    """No enabled agent (app) by that name."""


class AgentConfigError(ValueError):
    pass


@dataclass
class AppInfo:
    """What the dashboard and API show about an app (either kind)."""

    name: str
    description: str
    model: str
    instruction: str
    tools: list[str] = field(default_factory=list)
    agent_tools: list[tuple[str, bool]] = field(default_factory=list)
    source: str = "configured"  # or "code"
    config_id: int | None = None


def code_agents() -> dict[str, str]:
    """Code-defined apps (ADKWEB_CODE_AGENTS and ADKWEB_AGENTS_DIR): name -> where from."""
    return code_apps.code_apps()


def app_names() -> list[str]:
    """Every enabled app: admin-configured, code-defined and remote."""
    names = set(AgentConfig.objects.filter(enabled=True).values_list("name", flat=True))
    names.update(code_agents())
    names.update(RemoteApp.objects.filter(enabled=True).values_list("name", flat=True))
    return sorted(names)


@dataclass(frozen=True)
class Menus:
    """What filter menus offer, from the configuration (two queries): `apps` as app_names() gives
    them, `all_apps` with the disabled configured agents too, and `tools`: every tool an agent may
    call here (the code registry's, those admin-configured agents name, those of code-defined
    agents' trees; remote apps' tools live on their servers)."""

    apps: list[str]
    all_apps: list[str]
    tools: list[str]


def _menu_rows() -> QuerySet:
    """One query: the configured agents, and the enabled remote apps (marked, with no tools)."""
    configured = AgentConfig.objects.order_by().annotate(remote=Value(False))
    enabled_remote = (
        RemoteApp.objects.filter(enabled=True)
        .order_by()
        .annotate(on=Value(True), no_tools=Value(None, output_field=JSONField()), remote=Value(True))
    )
    return configured.values_list("name", "enabled", "tools", "remote").union(
        enabled_remote.values_list("name", "on", "no_tools", "remote"), all=True
    )


def menus() -> Menus:
    enabled, every, tools = set(code_agents()), set(code_agents()), set(registry.names())
    remote: set[str] = set()
    # Every inbox page asks: the union is built and compiled once per process, then only executed.
    rows = compiled.rows("agent_menus", (), _menu_rows)
    for name, on, names, is_remote in rows:
        if is_remote:
            remote.add(name)
            continue
        every.add(name)
        if on:
            enabled.add(name)
        tools.update(t for t in names or [] if isinstance(t, str))
    for app_name in code_agents():
        tools.update(_code_tool_names(app_name))
    return Menus(sorted(enabled | remote), sorted(every | remote), sorted(tools))


@functools.cache  # code is code: an app's tools change with a deploy, which restarts the process
def _code_tool_names(app_name: str) -> frozenset[str]:
    try:
        agent = code_apps.root_agent(code_apps.load(app_name))
    except Exception:  # a code app that does not load: the agents page says why
        return frozenset()
    names: set[str] = set()
    for node in agent_tree(agent):
        for tool in getattr(node, "tools", None) or []:
            name = None if is_agent_tool(tool) else getattr(tool, "name", None) or getattr(tool, "__name__", None)
            if isinstance(name, str):
                names.add(name)
    return frozenset(names)


def local_app_exists(app_name: str) -> bool:
    """An app of that name runs here (code-defined or admin-configured, enabled or not)."""
    return app_name in code_agents() or AgentConfig.objects.filter(name=app_name).exists()


def remote_app(app_name: str) -> RemoteApp | None:
    """The enabled remote app of that name, unless a local app has the name (local apps win)."""
    remote = RemoteApp.objects.filter(name=app_name, enabled=True).first()
    if remote is None or local_app_exists(app_name):
        return None
    return remote


def resolve_model(name: str) -> Any:
    """A model object or name ADK understands; the offline demo model for demo-* names."""
    from .demo.model import DemoLlm, is_demo_model

    if is_demo_model(name):
        return DemoLlm(model=name)
    if name.startswith("gemini") and settings.GEMINI_BASE_URL:
        from google.adk.models.google_llm import Gemini

        return Gemini(model=name, base_url=settings.GEMINI_BASE_URL)
    return name


def attach_rejection_reason(tool: Any, args: dict, tool_context: Any, tool_response: Any) -> dict | None:
    """ADK answers a rejected confirmation with fixed text; pass the approver's reason on too."""
    confirmation = getattr(tool_context, "tool_confirmation", None)
    if (
        isinstance(tool_response, dict)
        and tool_response.get("error") == REJECTED_ERROR
        and confirmation is not None
        and isinstance(confirmation.payload, dict)
        and confirmation.payload.get("reason")
    ):
        return {**tool_response, "reason": str(confirmation.payload["reason"])}
    return None


def _build_config(config: AgentConfig, seen: frozenset[str]) -> Any:
    from google.adk.agents import LlmAgent
    from google.adk.tools.agent_tool import AgentTool
    from google.genai import types

    if config.name in seen:
        raise AgentConfigError(f"Agent {config.name!r} uses itself as a tool (through {' → '.join(seen)}).")
    tools: list[Any] = []
    for tool_name in config.tools:
        if tool_name not in registry:
            raise AgentConfigError(f"Agent {config.name!r} uses unknown tool {tool_name!r}.")
        tools.append(registry.get(tool_name).build())
    for link in config.agent_tools.select_related("child").order_by("id"):
        pausing = pausing_tools(link.child)
        if pausing:
            raise AgentConfigError(pausing_refusal(config.name, link.child.name, pausing))
        child = _build_config(link.child, seen | {config.name})
        tools.append(AgentTool(agent=child, skip_summarization=link.skip_summarization))
    gen = dict(config.generation_settings or {})
    try:
        generate_config = types.GenerateContentConfig(**gen) if gen else None
    except Exception as exc:  # pydantic.ValidationError: a bad admin setting
        raise AgentConfigError(f"Agent {config.name!r} has invalid generation settings: {exc}") from exc
    return LlmAgent(
        name=config.name,
        description=config.description,
        model=resolve_model(config.model),
        instruction=config.instruction,
        tools=tools,
        generate_content_config=generate_config,
        after_tool_callback=attach_rejection_reason,
    )


def _code_or_config(app_name: str) -> Any:
    try:
        obj = code_apps.load(app_name)
    except code_apps.CodeAppError as exc:
        raise AgentConfigError(str(exc)) from exc
    if obj is not None:
        refused = code_agent_tool_pauses(code_apps.root_agent(obj))
        if refused:
            raise AgentConfigError(refused)
        return obj
    config = AgentConfig.objects.filter(name=app_name, enabled=True).first()
    if config is None:
        if remote_app(app_name) is not None:
            raise AgentConfigError(f"{app_name!r} is served by a remote ADK server: it runs there, not here.")
        raise AgentNotFound(f"No enabled agent named {app_name!r}.")
    return _build_config(config, frozenset())


def build_agent(app_name: str) -> Any:
    """The root ADK agent for an app name (code-defined first, then admin-configured)."""
    return code_apps.root_agent(_code_or_config(app_name))


def build_app(app_name: str) -> Any:
    """The ADK `App` the runner runs for an app name: the single entry point for the runner.

    A code-defined App runs as its author built it (plugins, its own ResumabilityConfig, ...), and
    an agent from ADKWEB_AGENTS_DIR as `adk api_server` runs it (a plain App). adkweb's own agents
    (admin-configured, or bare agents in ADKWEB_CODE_AGENTS) run resumable: a run cut short by a
    crash continues its invocation by id, stored tool calls and responses not repeated.
    """
    import warnings

    from google.adk.apps import App, ResumabilityConfig

    obj = _code_or_config(app_name)
    if isinstance(obj, App):
        return obj
    if app_name in code_apps.code_apps() and app_name not in code_apps.dotted_apps():
        return App(name=app_name, root_agent=obj)  # from the agents folder: exactly as adk api_server
    with warnings.catch_warnings():  # ADK marks resumability experimental on every construction
        warnings.simplefilter("ignore")
        return App(name=app_name, root_agent=obj, resumability_config=ResumabilityConfig(is_resumable=True))


def app_info(app_name: str) -> AppInfo:
    if app_name in code_agents():
        agent = build_agent(app_name)
        model = getattr(agent, "model", "")
        return AppInfo(
            name=app_name,
            description=getattr(agent, "description", ""),
            model=model if isinstance(model, str) else getattr(model, "model", type(model).__name__),
            instruction=getattr(agent, "instruction", "") if isinstance(getattr(agent, "instruction", ""), str) else "",
            tools=[getattr(t, "name", getattr(t, "__name__", str(t))) for t in getattr(agent, "tools", [])],
            source="code",
        )
    config = AgentConfig.objects.filter(name=app_name).first()
    if config is None:
        raise AgentNotFound(f"No agent named {app_name!r}.")
    return AppInfo(
        name=config.name,
        description=config.description,
        model=config.model,
        instruction=config.instruction,
        tools=list(config.tools),
        agent_tools=[(link.child.name, link.skip_summarization) for link in config.agent_tools.select_related("child")],
        config_id=config.pk,
    )


def tool_parameters(app_name: str, tool_name: str) -> dict[str, Any] | None:
    """The JSON schema of a tool's parameters as the model sees them (its declaration), or None when
    the tool is unknown or declares none. Registered tools are read from the registry; a code
    agent's own tools from the built agent."""
    decl: Any = None
    try:
        if tool_name in registry:
            decl = registry.get(tool_name).build()._get_declaration()
        else:
            tools = {getattr(t, "name", ""): t for t in getattr(build_agent(app_name), "tools", []) or []}
            tool = tools.get(tool_name)
            decl = tool._get_declaration() if tool is not None and hasattr(tool, "_get_declaration") else None
    except Exception:  # an agent or tool that cannot be built has no form: callers fall back
        return None
    if decl is None:
        return None
    if decl.parameters_json_schema is not None:
        return dict(decl.parameters_json_schema)
    if decl.parameters is not None:
        return decl.parameters.model_dump(mode="json", exclude_none=True)
    return None
