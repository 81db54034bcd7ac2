"""Whether an admin-configured agent may take a new name. Its conversations are ADK sessions keyed by its name
(AdkSession.app_name, the key ADK's API addresses them by: /apps/<name>/users/<user>/sessions/<id>), and so
are their tickets, the agent's app and user state, artifacts and memory; a conversation's turn builds the
agent named by its app_name when it runs. Renamed under them, they could no longer run: a message fails ("No
enabled agent named ..."), and a ticket's decision is recorded but its answer never reaches the agent (the
approved action never runs). Carrying them all to the new name would also break the ADK clients that address
them by the old one, and a turn running under the old name meanwhile. So a rename is refused while the
agent has a conversation that is not deleted (archived: its open tickets were cancelled with it), and while
approval policies name it (their rules would stop applying to its tickets); the form says why and what to
do. The agent's row is locked by the admin's save (AgentConfigAdmin.get_object)."""

from __future__ import annotations


def rename_refusal(name: str) -> str | None:
    """Why the agent named `name` may not be renamed now, or None."""
    return _conversations_refusal(name) or _policies_refusal(name)


def _conversations_refusal(name: str) -> str | None:
    from approvals.models import PendingCall

    from .models import AdkSession

    live = AdkSession.objects.filter(app_name=name).count()  # the live ones (not archived)
    if not live:
        return None
    open_ = list(
        PendingCall.objects.filter(app_name=name, status__in=PendingCall.OPEN_STATUSES)
        .order_by("pk")
        .values_list("pk", flat=True)[:11]
    )
    tickets = ""
    if open_:
        shown = ", ".join(f"#{pk}" for pk in open_[:10]) + (", ..." if len(open_) > 10 else "")
        tickets = (
            f", with open tickets ({shown}) whose answers would be recorded but never reach the agent, so "
            "the decided actions would never run"
        )
    some = "1 conversation of this agent is" if live == 1 else f"{live} conversations of this agent are"
    return (
        f"Not renamed: {some} kept under its name {name!r} (ADK and its clients address a "
        f"conversation by its agent's name){tickets}. Renamed, they could no longer run. Keep the name, or add "
        "a new agent with the new name; rename this one once its conversations are deleted."
    )


def _policies_refusal(name: str) -> str | None:
    """Approval policies name their agent by its name: renamed, the agent's tickets would open without their
    rules (who decides, how many approvals, four-eyes), under a broader policy or the default rule."""
    from approvals.models import Policy

    named = list(Policy.objects.filter(agent=name).order_by("name").values_list("name", flat=True))
    if not named:
        return None
    policies = ", ".join(repr(n) for n in named)
    return (
        f"Not renamed: the approval policies {policies} apply to this agent by its name {name!r}; renamed, its "
        "tickets would open without their rules (who decides, how many approvals, four-eyes). Set their agent "
        "to the new name first (Policies), then rename it."
    )
