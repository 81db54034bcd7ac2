"""Django admin for agents: tools picked from the code registry, each tool's declaration shown
exactly as ADK builds it (long-running ones marked); remote apps with a write-only auth header."""

from __future__ import annotations

import json

from django import forms
from django.contrib import admin
from django.utils.html import format_html_join

from adkweb.storable import StorableJSONField

from .agent_rename import rename_refusal
from .agents import AgentConfigError, local_app_exists
from .config_history import agent_config_record
from .config_tools import answers_on_their_way, confirmations_stranded
from .models import AdkSession, AgentConfig, AgentConfigVersion, AgentToolLink, RemoteApp, Turn, validate_agent_name
from .services import agent_config_check, session_archive
from .tools import registry


def _tool_choices() -> list[tuple[str, str]]:
    return [(t.name, f"{t.name} ({t.kind})") for t in registry.all()]


class AgentConfigForm(forms.ModelForm):
    tools = forms.MultipleChoiceField(
        choices=_tool_choices,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Tools from the code registry (agents_app.tools.registry).",
    )

    class Meta:
        model = AgentConfig
        fields = ["name", "description", "model", "instruction", "tools", "generation_settings", "enabled"]
        field_classes = {"generation_settings": StorableJSONField}  # Django's takes NaN, 1e400, "\\u0000"
        help_texts = {
            "model": "demo-offline (the offline demo model, no LLM) or a Gemini model such as gemini-2.5-flash."
        }

    def clean_name(self) -> str:
        name = self.cleaned_data["name"]
        if RemoteApp.objects.filter(name=name).exists():
            raise forms.ValidationError(f"A remote app is named {name!r}; pick another name.")
        if self.instance.pk and name != self.instance.name:  # its row is locked (`AgentConfigAdmin.get_object`)
            refusal = rename_refusal(self.instance.name)
            if refusal:
                raise forms.ValidationError(refusal)
        return name

    def clean_tools(self) -> list[str]:
        """Not while a decided confirmation of a tool taken out is on its way to the agent (its row is
        locked: `AgentConfigAdmin.get_object`, so a decision committing now is seen)."""
        tools = self.cleaned_data.get("tools") or []
        if self.instance.pk:
            refusal = answers_on_their_way(self.instance.name, set(self.instance.tools or []) - set(tools))
            if refusal:
                raise forms.ValidationError(refusal)
        return tools

    def clean_generation_settings(self) -> dict:
        value = self.cleaned_data.get("generation_settings") or {}
        if not isinstance(value, dict):
            raise forms.ValidationError('Generation settings must be a JSON object, e.g. {"temperature": 0.2}.')
        from google.genai import types
        from pydantic import ValidationError

        try:
            types.GenerateContentConfig(**value)
        except (ValidationError, TypeError) as exc:
            raise forms.ValidationError(f"Not valid generation settings: {exc}") from exc
        return value


class AgentToolLinkInline(admin.TabularInline):
    model = AgentToolLink
    fk_name = "parent"
    extra = 0
    verbose_name = "agent used as a tool"
    verbose_name_plural = "agents used as tools (AgentTool)"


@admin.register(AgentConfig)
class AgentConfigAdmin(admin.ModelAdmin):
    form = AgentConfigForm
    list_display = ["name", "model_label", "enabled", "version", "tool_list", "updated_at"]
    list_filter = ["enabled", "model"]
    search_fields = ["name", "description", "instruction"]
    readonly_fields = ["version", "history", "tool_declarations"]
    inlines = [AgentToolLinkInline]

    def get_object(self, request, object_id, from_field=None):  # noqa: ANN001, ANN201 - Django's signature
        """A save's agent, its row locked for the save's transaction (the admin's POST is one) before its
        form is checked: a decision on one of its confirmations commits first, or waits for the save
        (agents_app.config_tools)."""
        obj = super().get_object(request, object_id, from_field)
        if obj is not None and request.method == "POST":
            obj = AgentConfig.objects.select_for_update(of=("self",)).filter(pk=obj.pk).first()
        return obj

    @admin.display(description="History")
    def history(self, obj: AgentConfig) -> str:
        rows = [
            (v.pk, v.version, v.changed_by_username or "setup", v.created_at.strftime("%Y-%m-%d %H:%M"))
            for v in AgentConfigVersion.objects.filter(agent=obj).order_by("-version")[:20]
        ]
        if not rows:
            return "No versions yet."
        return format_html_join(", ", '<a href="../../agentconfigversion/{}/change/">v{}</a> ({}, {})', rows)

    @admin.display(description="model", ordering="model")
    def model_label(self, obj: AgentConfig) -> str:
        from .demo.model import DEMO_LABEL, is_demo_model

        return f"{obj.model} — {DEMO_LABEL}" if is_demo_model(obj.model) else obj.model

    @admin.display(description="tools")
    def tool_list(self, obj: AgentConfig) -> str:
        return ", ".join(obj.tools)

    @admin.display(description="What the model sees")
    def tool_declarations(self, obj: AgentConfig) -> str:
        rows = []
        for name in obj.tools or []:
            if name not in registry:
                rows.append((name, "unknown tool: not in the registry", ""))
                continue
            tool = registry.get(name)
            mark = "long-running: the agent pauses for a response" if tool.long_running else tool.kind
            rows.append((name, mark, json.dumps(tool.declaration(), indent=2)))
        if not rows:
            return "No tools selected."
        return format_html_join("", '<div class="tool-decl"><strong>{}</strong> <em>({})</em><pre>{}</pre></div>', rows)

    def save_related(self, request, form, formsets, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        agent_config_record(config=form.instance, actor=request.user)  # a version if anything changed
        stranded = confirmations_stranded(form.instance.name)
        if stranded:
            tools = ", ".join(f"{tool} ({n})" for tool, n in stranded.items())
            self.message_user(
                request,
                f"Saved, but confirmations wait for tools this agent no longer has: {tools}. Nobody can answer "
                "them until the agent has those tools again (due, they expire without reaching it).",
                level="warning",
            )
        try:
            agent_config_check(config=form.instance)
        except AgentConfigError as exc:
            self.message_user(request, f"Saved, but this agent cannot run yet: {exc}", level="error")
        for parent in AgentConfig.objects.filter(agent_tools__child=form.instance, enabled=True).order_by("name"):
            try:  # the agents that use this one as a tool build it too (a tool that pauses stops them)
                agent_config_check(config=parent)
            except AgentConfigError as exc:
                self.message_user(
                    request,
                    f"Saved, but {parent.name!r}, which uses this agent as a tool, cannot run now: {exc}",
                    level="error",
                )


@admin.register(AgentConfigVersion)
class AgentConfigVersionAdmin(admin.ModelAdmin):
    """Agents' configuration history: read-only (written when an agent is saved)."""

    list_display = ["agent_name", "version", "changed_by_username", "created_at"]
    list_filter = ["agent_name"]
    fields = readonly_fields = ("agent", "agent_name", "version", "config_json", "changed_by_username", "created_at")

    @admin.display(description="configuration")
    def config_json(self, obj: AgentConfigVersion) -> str:
        return format_html_join("", "<pre>{}</pre>", [(json.dumps(obj.config, indent=2, ensure_ascii=False),)])

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Turn)
class TurnAdmin(admin.ModelAdmin):
    list_display = ["id", "session", "kind", "status", "attempts", "created_at", "finished_at"]
    list_filter = ["status", "kind"]
    readonly_fields = [f.name for f in Turn._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # part of the record: what ran, when, with which configuration


@admin.register(AdkSession)
class AdkSessionAdmin(admin.ModelAdmin):
    """Live conversations, read-only. Deleting one archives it (session_archive): it leaves ADK's API,
    the pages and this list, while its events, turns, tickets and responses stay for the audit trail."""

    list_display = ["id", "app_name", "user_id", "session_id", "revision", "update_time"]
    list_filter = ["app_name"]
    search_fields = ["app_name", "user_id", "session_id"]
    readonly_fields = [f.name for f in AdkSession._meta.fields if f.name not in ("archived_at", "archived_by")]
    exclude = ["archived_at", "archived_by"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def get_deleted_objects(self, objs, request):
        """Nothing is deleted: the confirmation lists the sessions to archive (busy ones refuse)."""
        busy = {s.pk for s in objs if s.turns.filter(status__in=(Turn.Status.QUEUED, Turn.Status.RUNNING)).exists()}
        listed = [f"{s} (archived: its events, turns, tickets and responses are kept)" for s in objs]
        protected = [
            f"{s}: the agent is working in it; delete it once its turn has finished" for s in objs if s.pk in busy
        ]
        return listed, {"sessions": len(listed)}, set(), protected

    def delete_model(self, request, obj: AdkSession) -> None:
        session_archive(session=obj, actor=request.user)

    def delete_queryset(self, request, queryset) -> None:
        for session in list(queryset):
            session_archive(session=session, actor=request.user)


class RemoteAppForm(forms.ModelForm):
    """The auth header's value is write-only: never rendered back, kept when left empty."""

    new_auth_header_value = forms.CharField(
        required=False,
        max_length=4096,
        label="Auth header value",
        help_text="Secret, sent with every request to the remote server and never shown again. Leave empty to "
        "keep the current value.",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
    )
    clear_auth_header = forms.BooleanField(required=False, label="Remove the auth header value")

    class Meta:
        model = RemoteApp
        fields = ["name", "description", "base_url", "remote_app_name", "auth_header_name", "enabled"]

    def clean_name(self) -> str:
        name = self.cleaned_data["name"]
        validate_agent_name(name)
        if local_app_exists(name):
            raise forms.ValidationError(f"An agent named {name!r} already runs here; pick another name.")
        return name

    def clean_base_url(self) -> str:
        return self.cleaned_data["base_url"].strip().rstrip("/")


@admin.register(RemoteApp)
class RemoteAppAdmin(admin.ModelAdmin):
    form = RemoteAppForm
    list_display = ["name", "remote_app_name", "base_url", "auth", "enabled", "updated_at"]
    list_filter = ["enabled"]
    search_fields = ["name", "description", "remote_app_name", "base_url"]
    readonly_fields = ["auth"]
    fields = [
        "name",
        "description",
        "base_url",
        "remote_app_name",
        "auth_header_name",
        "auth",
        "new_auth_header_value",
        "clear_auth_header",
        "enabled",
    ]

    @admin.display(description="auth header")
    def auth(self, obj: RemoteApp) -> str:
        return obj.auth_label if obj.pk else "none"

    def save_model(self, request, obj: RemoteApp, form, change: bool) -> None:
        if form.cleaned_data.get("clear_auth_header"):
            obj.auth_header_value = ""
        elif form.cleaned_data.get("new_auth_header_value"):
            obj.auth_header_value = form.cleaned_data["new_auth_header_value"]
        super().save_model(request, obj, form, change)
