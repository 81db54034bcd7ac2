"""Who may set app-wide session state: `app:` keys are read by every user's sessions of an app, so a
person sets them only with the permission to configure agents (agent admins, superusers); ADK's server
lets anyone. The agent's own writes are not checked. Asked of what a person sends (the API: check_state)
and of what a turn stored before this was checked, when it is retried (services.turn_retry)."""

from __future__ import annotations

from typing import Any

from adkweb.roles import is_agent_admin

APP_PREFIX = "app:"  # google.adk.sessions.state.State.APP_PREFIX (google.adk is the ADK glue's to import)


def refused_keys(user: Any, state: dict[str, Any] | None) -> str:
    """The `app:` keys of `state` that `user` (None: nobody, e.g. a deleted sender) may not set, named for
    a message ("" when there are none or the user may)."""
    shared = sorted(key for key in state or () if key.startswith(APP_PREFIX))
    if not shared or (user is not None and is_agent_admin(user)):
        return ""
    return ", ".join(key[:80] for key in shared[:5]) + (f" and {len(shared) - 5} more" if len(shared) > 5 else "")
