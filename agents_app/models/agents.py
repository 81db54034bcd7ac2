"""Agents configured by admins: their configuration, its saved versions, and agents used as tools."""

from __future__ import annotations

import re

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

AGENT_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def validate_agent_name(value: str) -> None:
    if not AGENT_NAME_RE.match(value) or value == "user":
        raise ValidationError(
            "An agent name must be a Python identifier (letters, digits, underscores) and not 'user'."
        )


class AgentConfig(models.Model):
    """An agent configured by an admin; built into an ADK LlmAgent at run time."""

    name = models.CharField(max_length=100, unique=True, validators=[validate_agent_name])
    description = models.TextField(blank=True)
    model = models.CharField(max_length=100, default="demo-offline")
    instruction = models.TextField(blank=True)
    tools = models.JSONField(default=list, blank=True, help_text="Tool names from the code registry.")
    generation_settings = models.JSONField(
        default=dict, blank=True, help_text='e.g. {"temperature": 0.2, "max_output_tokens": 1024}'
    )
    enabled = models.BooleanField(default=True)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class AgentConfigVersion(models.Model):
    """One version of an agent's configuration as it was saved (model, instruction, tools, settings,
    agents used as tools), with who saved it and when: kept forever, so a past turn's configuration
    can always be read (Turn.config_version)."""

    agent = models.ForeignKey(
        AgentConfig, null=True, blank=True, on_delete=models.SET_NULL, related_name="versions", editable=False
    )
    agent_name = models.CharField(max_length=100, db_index=True, editable=False, help_text="The agent's name then.")
    version = models.PositiveIntegerField(editable=False)
    config = models.JSONField(editable=False)
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )
    changed_by_username = models.CharField(max_length=150, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["agent_name", "-version"]
        constraints = [models.UniqueConstraint(fields=["agent", "version"], name="unique_agent_config_version")]

    def __str__(self) -> str:
        return f"{self.agent_name} v{self.version}"


class AgentToolLink(models.Model):
    """Another agent used as a tool (ADK AgentTool) by `parent`."""

    parent = models.ForeignKey(AgentConfig, on_delete=models.CASCADE, related_name="agent_tools")
    child = models.ForeignKey(AgentConfig, on_delete=models.PROTECT, related_name="used_by")
    skip_summarization = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["parent", "child"], name="unique_agent_tool")]

    def __str__(self) -> str:
        return f"{self.parent} → {self.child}"

    def clean(self) -> None:
        if self.parent_id and self.parent_id == self.child_id:
            raise ValidationError("An agent cannot use itself as a tool.")
