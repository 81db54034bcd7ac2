"""Agent configuration (`agents`), the ADK session store (`sessions`), the per-session inbox of turns
(`turns`), API keys and idempotency keys (`api`), ADK's artifacts and memory (`adk_stores`), and remote
apps (agents_app.remote_models). Import them from here (migrations name `validate_agent_name` and
`artifact_upload_to` here too)."""

from ..remote_models import RemoteApp, RemoteSession
from .adk_stores import Artifact, MemoryItem, artifact_upload_to
from .agents import AgentConfig, AgentConfigVersion, AgentToolLink, validate_agent_name
from .api import ApiToken, IdempotencyKey
from .sessions import AdkSession, AppState, StoredEvent, UserState
from .turns import Turn

__all__ = [
    "AdkSession",
    "AgentConfig",
    "AgentConfigVersion",
    "AgentToolLink",
    "ApiToken",
    "AppState",
    "Artifact",
    "IdempotencyKey",
    "MemoryItem",
    "RemoteApp",
    "RemoteSession",
    "StoredEvent",
    "Turn",
    "UserState",
    "artifact_upload_to",
    "validate_agent_name",
]
