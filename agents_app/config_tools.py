"""Whether an agent still has a tool: what an answer to one of its tool confirmations needs (ADK runs, or
refuses, a confirmed call only with its tool among the agent's tools: `_resolve_confirmation_targets`
fails the whole turn with "Tool ... is not registered" otherwise), and which of an agent's tools pause for a
person (what an agent used as another's tool may not have: agents._build_config).

A decision and an admin's save that takes the tool out serialize on the agent's configuration row: the
decision reads it FOR SHARE (`configured_without_tool(lock=True)`, in its transaction), every writer of
an agent's tools locks its row first (the admin's change form, `AgentConfigAdmin.get_object`; the UPDATE of
any other save conflicts too). Save first: the decision sees the tool gone (approvals' ToolGone, 409).
Decision first: the save sees the answer on its way (`answers_on_their_way`) and is refused until it has
reached the agent, which is built when its turn runs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from django.db import connection

from adkweb.row_locks import for_share

from .code_apps import code_apps
from .models import AgentConfig, Turn
from .tools import registry


def configured_without_tool(app_name: str, tool_name: str, *, lock: bool = False) -> bool:
    """True when `app_name` is an admin-configured agent (enabled or not) that has not the tool `tool_name`
    among its own tools: an admin took it out since the agent called it. An agent it uses as a tool does
    not lend it the tool: ADK confirms a call with the confirming agent's own tools, and an AgentTool's
    agent runs in a session of its own (its confirmations never reach this one). Code-defined agents
    (their tools change with a deploy), remote apps and names with no agent here: False (their runs say
    what is wrong, before storing anything). `lock`: hold the agent's row FOR SHARE to the end of the
    caller's transaction (PostgreSQL)."""
    if not tool_name or app_name in code_apps():
        return False
    found = _tools_of(lock and connection.vendor == "postgresql", name=app_name)
    return found is not None and tool_name not in _call_names(found)


def _tools_of(share: bool, **where: Any) -> list | None:
    """The tools of the configuration `where` picks (None: no such agent); `share`: its row locked FOR SHARE
    first (a writer's lock is waited for), then read in a statement of its own, which sees what it committed."""
    rows = AgentConfig.objects.filter(**where)
    if share:
        rows = AgentConfig.objects.filter(pk__in=for_share(rows))
    return rows.values_list("tools", flat=True).first()


def pausing_tools(config: AgentConfig) -> list[str]:
    """The agent's own tools that pause for a person (long-running, or needing a confirmation each time:
    ADK's pause tools are long-running too), which it cannot use as another agent's tool (AgentTool). A
    tool that asks for a confirmation only for some arguments (a callable) is not one: it runs without a
    person for the others, and for these ADK's AgentTool answers an error, the tool not run."""
    found = []
    for name in config.tools or []:
        tool = registry.get(name) if isinstance(name, str) and name in registry else None
        if tool is None:
            continue
        adk_long = tool.adk_tool is not None and getattr(tool.adk_tool, "is_long_running", False)
        if tool.long_running or tool.require_confirmation is True or adk_long:
            found.append(name)
    return found


def pausing_refusal(parent: str, child: str, tools: list[str]) -> str:
    """Why `parent` cannot run: `child`, which it uses as a tool (ADK's AgentTool), has these tools that pause."""
    return (
        f"Agent {parent!r} uses {child!r} as a tool, and its tool {', '.join(tools)} pauses for a person: an "
        "agent used as a tool runs in a session of its own that ADK throws away when it returns, so its pause "
        "would reach nobody (no ticket; the agent might tell the user a request waits for approval that no "
        f"approver sees). Give {parent!r} that tool itself instead."
    )


def code_agent_tool_pauses(root: Any) -> str | None:
    """pausing_refusal for a code-defined agent tree (None: nothing pauses in an agent used as a tool). The
    tools of an AgentTool's agent count with those of its sub-agents and of the agents it uses as tools in
    turn (all of them run in the throwaway session): a long-running one (ADK's pause tools too), or one
    that asks for a confirmation every time (not for some arguments only, as pausing_tools)."""
    for agent in agent_tree(root):
        for child in [t.agent for t in getattr(agent, "tools", None) or [] if is_agent_tool(t)]:
            pausing = [
                f"{tool.name}" if node is child else f"{tool.name} (of {node.name!r})"
                for node in agent_tree(child)
                for tool in getattr(node, "tools", None) or []
                if getattr(tool, "is_long_running", False) is True or getattr(tool, "_require_confirmation", 0) is True
            ]
            if pausing:
                return pausing_refusal(agent.name, child.name, pausing)
    return None


def agent_tree(root: Any) -> Iterator[Any]:
    """`root` and every agent under it, each once, breadth first: its sub-agents and the agents it uses as
    tools (ADK's AgentTool), and theirs."""
    todo, seen = [root], set()
    while todo:
        node = todo.pop(0)
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        todo.extend(getattr(node, "sub_agents", None) or [])
        todo.extend(tool.agent for tool in getattr(node, "tools", None) or [] if is_agent_tool(tool))


def is_agent_tool(tool: Any) -> bool:
    return hasattr(tool, "agent") and hasattr(tool, "skip_summarization")  # ADK's AgentTool


def _call_names(tool_names: list) -> set:
    """The names a call of these configured tools may carry: each registry name, and the name ADK gives the
    tool it builds (its function's, or an ADK tool object's own), which differ for a tool registered under
    another name."""
    names = set(tool_names)
    for name in tool_names:
        if isinstance(name, str) and name in registry:
            found = registry.get(name)
            names.add(getattr(found.adk_tool if found.adk_tool is not None else found.func, "name", None))
            names.add(getattr(found.func, "__name__", None))
    return names


def confirmations_stranded(app_name: str) -> dict[str, int]:
    """The agent's open tool confirmations whose tool it no longer has (`configured_without_tool`), as
    {tool name: how many}: nobody can answer them until it has the tool again (approvals' ToolGone)."""
    from approvals.models import PendingCall

    waiting = PendingCall.objects.filter(
        app_name=app_name, kind=PendingCall.Kind.CONFIRMATION, status__in=PendingCall.OPEN_STATUSES
    )
    counts = Counter(waiting.values_list("tool_name", flat=True))
    return {tool: n for tool, n in sorted(counts.items()) if configured_without_tool(app_name, tool)}


def answers_on_their_way(app_name: str, removed: set[str]) -> str | None:
    """Why the agent may not lose the tools `removed` now, or None: a confirmation of one of them was
    decided and the turn that carries its answer has not run (queued or running). The agent is built when
    that turn runs: without the tool, ADK fails it and the decided call never runs (nor can the turn be
    run again: it stored the answer)."""
    from approvals.models import PendingCall, Response

    if not removed:
        return None
    names = _call_names(sorted(removed))
    on_their_way = (
        Response.objects.filter(
            pending_call__app_name=app_name,
            pending_call__kind=PendingCall.Kind.CONFIRMATION,
            pending_call__tool_name__in=names,
            final=True,
            turn__status__in=(Turn.Status.QUEUED, Turn.Status.RUNNING),
        )
        .select_related("pending_call")
        .order_by("pending_call_id")
    )
    said = [
        f"ticket #{r.pending_call_id} ({r.pending_call.tool_name}, {r.pending_call.get_status_display().lower()})"
        for r in on_their_way
    ]
    if not said:
        return None
    return (
        f"Not saved: the answer to {', '.join(said)} is on its way to the agent (its turn has not run yet), "
        "and without the tool that turn would fail: the decided call would never run. Save again once it has "
        "run (usually within seconds)."
    )
