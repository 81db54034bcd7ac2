"""The rules tickets open under (policies) and the standing grants that approve like tickets at once."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.db.models.functions import Coalesce

from agents_app.models import AdkSession

from .tickets import PendingCall


class Policy(models.Model):
    """Rules for the tickets it matches: who sees and decides them, how many must agree, by when,
    and what happens otherwise. Edited by agent admins; each change of rules bumps `version`."""

    class AutoDecision(models.TextChoices):
        APPROVE = "approve", "approve at once"
        REJECT = "reject", "reject at once"

    name = models.CharField(max_length=128, unique=True)
    agent = models.CharField(max_length=128, blank=True, help_text="The agent (app) it applies to; empty: any.")
    tool = models.CharField(max_length=128, blank=True, help_text="The tool it applies to; empty: any.")
    kind = models.CharField(
        max_length=16, blank=True, choices=PendingCall.Kind.choices, help_text="The kind of pause; empty: any."
    )
    condition = models.TextField(
        blank=True, max_length=1000, help_text='On the arguments, e.g. amount > 1000 and purpose != "travel".'
    )
    priority = models.IntegerField(default=0, help_text="Higher wins; among equals the most specific policy wins.")
    approver_groups = models.ManyToManyField(Group, blank=True, related_name="approving_policies")
    escalation_groups = models.ManyToManyField(Group, blank=True, related_name="escalating_policies")
    required_approvals = models.PositiveSmallIntegerField(default=1)
    four_eyes = models.BooleanField(default=False, help_text="The requester may never decide their own ticket.")
    auto_decision = models.CharField(max_length=8, blank=True, choices=AutoDecision.choices)
    auto_reason = models.CharField(max_length=500, blank=True)
    auto_confirmations = models.BooleanField(
        default=False, help_text="Let the auto decision apply to tool confirmations too (off: a person confirms)."
    )
    due_in_seconds = models.PositiveIntegerField(null=True, blank=True)
    remind_before_seconds = models.PositiveIntegerField(null=True, blank=True)
    escalate_after_seconds = models.PositiveIntegerField(null=True, blank=True)
    allow_grants = models.BooleanField(default=True, help_text="Approvers may give standing grants for its tickets.")
    enabled = models.BooleanField(default=True)
    version = models.PositiveIntegerField(default=1, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )

    class Meta:
        ordering = ["-priority", "name"]
        verbose_name_plural = "policies"

    def __str__(self) -> str:
        return f"{self.name} (v{self.version})"


class StandingGrant(models.Model):
    """ "Also allow this tool for this conversation (or this user) until ...": while it lasts,
    matching tickets are approved at once, in the name of whoever gave it."""

    class Scope(models.TextChoices):
        SESSION = "session", "this conversation"
        USER = "user", "this user"

    scope = models.CharField(max_length=8, choices=Scope.choices)
    app_name = models.CharField(max_length=128)
    tool_name = models.CharField(max_length=128)
    kind = models.CharField(max_length=16, choices=PendingCall.Kind.choices)
    requester = models.CharField(max_length=128, db_index=True)
    session = models.ForeignKey(AdkSession, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    # The rules it was given under: it approves only tickets that open under the same policy.
    policy = models.ForeignKey(Policy, null=True, blank=True, on_delete=models.SET_NULL, related_name="grants")
    ticket = models.ForeignKey(PendingCall, on_delete=models.PROTECT, related_name="grants_given")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(db_index=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Why it was ended when nobody revoked it by hand (e.g. a duplicate ended by migration 0011); shown with it.
    revoked_reason = models.CharField(max_length=200, blank=True, default="", db_default="")
    # Holds its place among like grants (the constraints: one per what it approves) until it is revoked, or
    # until it has ended and a like grant is given (grants.grant_give retires it then: an ended grant with
    # this still True approves nothing).
    current = models.BooleanField(default=True, db_default=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        # What a grant approves (grants.grant_matching): agent, tool, kind, policy and its conversation (scope
        # "session") or requester (scope "user"). Two such grants in force at once made revoking one leave
        # the other approving; a policy-less grant's NULL would never collide, hence the Coalesce.
        constraints = [
            models.UniqueConstraint(
                *(models.F(name) for name in ("app_name", "tool_name", "kind", whose)),
                Coalesce(models.F("policy"), models.Value(0)),
                condition=models.Q(current=True, scope=scope),
                name=f"grant_one_current_per_{scope}",
            )
            for scope, whose in (("session", "session"), ("user", "requester"))
        ]

    def __str__(self) -> str:
        return f"grant #{self.pk}: {self.tool_name} for {self.get_scope_display()}"
