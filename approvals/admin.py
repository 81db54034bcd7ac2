from typing import Any

from django.contrib import admin, messages
from django.db import transaction

from adkweb.errors import Conflict, Forbidden

from . import grants
from .models import PendingCall, Policy, Response, StandingGrant, TicketActivity
from .policies import policy_bump_version
from .policy_forms import PolicyForm
from .rules import policy_json


class ResponseInline(admin.TabularInline):
    model = Response
    extra = 0
    can_delete = False
    readonly_fields = [
        "action",
        "payload",
        "final",
        "comment",
        "actor_username",
        "actor_name",
        "source",
        "grant",
        "turn",
        "args_hash",
        "created_at",
    ]
    fields = tuple(readonly_fields)

    def has_add_permission(self, request, obj=None) -> bool:
        return False  # responses are sent from the ticket page or the API, which requeue the agent

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # append-only

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class ActivityInline(admin.TabularInline):
    model = TicketActivity
    extra = 0
    can_delete = False
    readonly_fields = ["kind", "actor", "message", "created_at"]
    fields = tuple(readonly_fields)

    def has_add_permission(self, request, obj=None) -> bool:
        return False  # history is written by what happens to the ticket

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(PendingCall)
class PendingCallAdmin(admin.ModelAdmin):
    list_display = ["id", "app_name", "tool_name", "kind", "requester", "status", "policy_name", "created_at"]
    list_filter = ["status", "kind", "app_name"]
    search_fields = ["call_id", "tool_name", "requester"]
    readonly_fields = [
        "session",
        "event",
        "app_name",
        "requester",
        "invocation_id",
        "kind",
        "call_id",
        "call_name",
        "tool_name",
        "args",
        "edited_args",
        "edited_by",
        "initial_response",
        "status",
        "policy",
        "policy_name",
        "policy_version",
        "required_approvals",
        "four_eyes",
        "due_at",
        "escalated_at",
        "created_at",
        "closed_at",
        "closed_by",
    ]
    exclude = ["approver_groups", "escalation_groups", "policy_rules"]
    inlines = [ResponseInline, ActivityInline]

    # The record: read-only. Tickets are opened by agents and decided on the ticket page or the API.
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Policy)
class PolicyAdmin(admin.ModelAdmin):
    """Agent admins edit policies here or on the Policies page; both use PolicyForm's checks."""

    form = PolicyForm
    list_display = [
        "name",
        "enabled",
        "agent",
        "tool",
        "kind",
        "condition",
        "priority",
        "required_approvals",
        "version",
    ]
    list_filter = ["enabled", "agent", "kind"]
    search_fields = ["name", "tool", "condition"]
    readonly_fields = ["version", "updated_by", "updated_at"]

    def save_model(self, request: Any, obj: Policy, form: Any, change: bool) -> None:
        self._before = policy_json(Policy.objects.get(pk=obj.pk)) if change else None
        obj.updated_by = request.user
        super().save_model(request, obj, form, change)

    def save_related(self, request: Any, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        policy_bump_version(policy=form.instance, before=getattr(self, "_before", None))

    # A policy deleted here (its page or "delete selected") ends its standing grants, as the Policies page
    # and /api/policies do (approvals.policies.policy_delete); the admin's own permission check applies.
    def delete_model(self, request: Any, obj: Policy) -> None:
        with transaction.atomic():
            grants.grants_revoke_for_policy(policy=obj, actor=request.user)
            super().delete_model(request, obj)

    def delete_queryset(self, request: Any, queryset: Any) -> None:
        with transaction.atomic():
            for policy in queryset:
                grants.grants_revoke_for_policy(policy=policy, actor=request.user)
            super().delete_queryset(request, queryset)


@admin.register(StandingGrant)
class StandingGrantAdmin(admin.ModelAdmin):
    """A record of who allowed what: read only. Revoking goes through `grants.grant_revoke` (the action
    below, as on the grants page and the API): it records who revoked, retires the grant's place among like
    grants (`current`), and refuses an ended one. Editing `revoked_at` here set no revoker, and clearing it
    brought an ended grant back into force beside the one that replaced it (a duplicate the database's
    constraint no longer covers); deleting one erased who gave the approvals it made."""

    list_display = ["id", "tool_name", "scope", "requester", "created_by", "expires_at", "revoked_at"]
    list_filter = ["scope", "app_name", "tool_name"]
    readonly_fields = [f.name for f in StandingGrant._meta.fields]
    actions = ["revoke_selected"]

    def has_add_permission(self, request: Any) -> bool:
        return False  # given with an approval (ticket page or API)

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False  # a view; revoked by the action

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False  # revoked, never erased

    def get_actions(self, request: Any) -> dict[str, Any]:
        return {name: action for name, action in super().get_actions(request).items() if name != "delete_selected"}

    @admin.action(description="Revoke the selected standing grants now")
    def revoke_selected(self, request: Any, queryset: Any) -> None:
        revoked, refused = [], []
        for grant in queryset.order_by("pk"):
            try:
                grants.grant_revoke(grant=grant, actor=request.user)
            except (Conflict, Forbidden) as error:
                refused.append(str(error))
            else:
                revoked.append(f"#{grant.pk}")
        if revoked:
            self.message_user(request, f"Revoked standing grant(s) {', '.join(revoked)}.", messages.SUCCESS)
        for reason in refused:
            self.message_user(request, reason, messages.WARNING)
