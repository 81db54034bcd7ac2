"""The policies and grants API: `/api/policies` (agent admins: list, create, read, update, delete,
dry run) and `/api/grants` (list, give from a ticket, revoke). Thin: parse, call a service or a
selector, answer JSON; refusals (`adkweb.errors`) become `{"detail": ...}` in `api_view`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from django.contrib.auth.models import Group
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from adkweb.api import api_view, int_param, iso, json_body, parse
from adkweb.errors import Forbidden, Invalid, NotFound
from adkweb.roles import is_policy_admin

from . import dry_run, grants, policies, selectors
from .models import PendingCall, Policy, StandingGrant
from .rules import policy_json

Name = Annotated[StrictStr, Field(max_length=128)]
Seconds = Annotated[StrictInt, Field(ge=1, le=366 * 24 * 3600)]


class PolicyBody(BaseModel):
    """A policy as written (create: name required; update: only what changes)."""

    model_config = ConfigDict(extra="forbid")

    name: Name | None = None
    agent: Name | None = None
    tool: Name | None = None
    kind: Literal["long_running", "confirmation", "input", "choice", "credential"] | None = None
    condition: Annotated[StrictStr, Field(max_length=1000)] | None = None
    priority: Annotated[StrictInt, Field(ge=-1000, le=1000)] | None = None
    approverGroups: list[Name] | None = None  # the API's own camelCase
    escalationGroups: list[Name] | None = None
    requiredApprovals: Annotated[StrictInt, Field(ge=1, le=policies.MAX_APPROVALS)] | None = None
    fourEyes: StrictBool | None = None
    autoDecision: Literal["approve", "reject"] | None = None
    autoReason: Annotated[StrictStr, Field(max_length=500)] | None = None
    autoConfirmations: StrictBool | None = None
    dueInSeconds: Seconds | None = None
    remindBeforeSeconds: Seconds | None = None
    escalateAfterSeconds: Seconds | None = None
    allowGrants: StrictBool | None = None
    enabled: StrictBool | None = None


FIELDS = {
    "name": "name",
    "agent": "agent",
    "tool": "tool",
    "kind": "kind",
    "condition": "condition",
    "priority": "priority",
    "requiredApprovals": "required_approvals",
    "fourEyes": "four_eyes",
    "autoDecision": "auto_decision",
    "autoReason": "auto_reason",
    "autoConfirmations": "auto_confirmations",
    "dueInSeconds": "due_in_seconds",
    "remindBeforeSeconds": "remind_before_seconds",
    "escalateAfterSeconds": "escalate_after_seconds",
    "allowGrants": "allow_grants",
    "enabled": "enabled",
}
BLANK_WHEN_NULL = {"agent", "tool", "kind", "condition", "auto_decision", "auto_reason"}
DEFAULT_WHEN_NULL = {"priority": 0, "required_approvals": 1, "four_eyes": False, "auto_confirmations": False}
DEFAULT_WHEN_NULL |= {"allow_grants": True, "enabled": True}


def _admin(request: HttpRequest) -> None:
    if not is_policy_admin(request.user):
        raise Forbidden("Only agent admins manage approval policies.")


def _groups(names: list[str]) -> list[Group]:
    found = {g.name: g for g in Group.objects.filter(name__in=names)}
    missing = sorted(set(names) - set(found))
    if missing:
        raise Invalid(f"No group named {', '.join(missing)}.")
    return [found[n] for n in dict.fromkeys(names)]


def _values(body: dict[str, Any], current: dict[str, Any]) -> tuple[dict[str, Any], list[Group], list[Group]]:
    """The model values after applying a body (present keys only; null means "any"/"none") to `current`."""
    values = {field: current.get(key) for key, field in FIELDS.items()}
    for key, field in FIELDS.items():
        if key in body:
            value = body[key]
            if value is None:
                value = "" if field in BLANK_WHEN_NULL else DEFAULT_WHEN_NULL.get(field)
            values[field] = value
    for field, value in values.items():  # absent on create, or null: the default
        if value is None:
            values[field] = "" if field in BLANK_WHEN_NULL else DEFAULT_WHEN_NULL.get(field)
    if not values.get("name"):
        raise Invalid("name: a policy needs a name.")
    approvers = _groups(body.get("approverGroups", current.get("approverGroups")) or [])
    escalation = _groups(body.get("escalationGroups", current.get("escalationGroups")) or [])
    return values, approvers, escalation


def _policy(request: HttpRequest, policy_id: int) -> Policy:
    _admin(request)
    policy = Policy.objects.filter(pk=policy_id).first()
    if policy is None:
        raise NotFound(f"Policy not found: {policy_id}")
    return policy


def _save(request: HttpRequest, policy: Policy | None, current: dict[str, Any]) -> Policy:
    raw = json_body(request)
    parse(PolicyBody, raw)
    values, approvers, escalation = _values(raw, current)
    return policies.policy_save(
        policy=policy, values=values, approver_groups=approvers, escalation_groups=escalation, actor=request.user
    )


@api_view("GET", "POST")
def policy_list(request: HttpRequest) -> JsonResponse:
    _admin(request)
    if request.method == "POST":
        return JsonResponse(policy_json(_save(request, None, {})), status=201)
    rows = Policy.objects.prefetch_related("approver_groups", "escalation_groups").order_by("-priority", "name")
    return JsonResponse([policy_json(p) for p in rows], safe=False)


@api_view("GET", "PUT", "PATCH", "DELETE")
def policy_detail(request: HttpRequest, policy_id: int) -> JsonResponse:
    policy = _policy(request, policy_id)
    if request.method == "DELETE":
        policies.policy_delete(policy=policy, actor=request.user)
        return JsonResponse({"deleted": policy_id})
    if request.method in ("PUT", "PATCH"):
        current = policy_json(policy) if request.method == "PATCH" else {"name": policy.name}
        policy = _save(request, policy, current)
    return JsonResponse(policy_json(policy))


@api_view("GET")
def policy_dry_run(request: HttpRequest, policy_id: int) -> JsonResponse:
    """What the policy would have done to the last N closed tickets (computed; nothing changes)."""
    policy = _policy(request, policy_id)
    last = int_param(request, "last", dry_run.DEFAULT_LAST, high=dry_run.MAX_LAST)
    return JsonResponse(dry_run.policy_dry_run(policy=policy, last=last).as_json())


# -- grants ---------------------------------------------------------------------------------------
class GrantSpecBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scope: Literal["session", "user"]
    minutes: Annotated[StrictInt, Field(ge=1, le=grants.MAX_MINUTES)]


class GrantBody(GrantSpecBody):
    ticket: StrictInt


def grant_json(grant: StandingGrant) -> dict[str, Any]:
    return {
        "id": grant.pk,
        "scope": grant.scope,
        "agent": grant.app_name,
        "tool": grant.tool_name,
        "kind": grant.kind,
        "requester": grant.requester,
        "session": grant.session.session_id if grant.session else None,
        "policy": grant.policy_id,
        "ticket": grant.ticket_id,
        "createdBy": grant.created_by.get_username(),
        "createdAt": iso(grant.created_at),
        "expiresAt": iso(grant.expires_at),
        "revokedAt": iso(grant.revoked_at),
        "revokedBy": grant.revoked_by.get_username() if grant.revoked_by else None,
        "revokedReason": grant.revoked_reason,
        "active": grant.revoked_at is None and grant.expires_at > timezone.now(),
        "approvedTickets": grant.responses.count(),
    }


def _visible_grant(request: HttpRequest, grant_id: int) -> StandingGrant:
    grant = selectors.grants_visible(user=request.user).filter(pk=grant_id).first()
    if grant is None:
        raise NotFound(f"Grant not found: {grant_id}")
    return grant


@api_view("GET", "POST")
def grant_list(request: HttpRequest) -> JsonResponse:
    if request.method == "POST":
        body = parse(GrantBody, json_body(request))
        ticket: PendingCall | None = selectors.ticket_visible_get(user=request.user, ticket_id=body.ticket)
        if ticket is None:
            raise NotFound(f"Pending call not found: {body.ticket}")
        spec = grants.GrantSpec(scope=body.scope, minutes=body.minutes)
        return JsonResponse(grant_json(grants.grant_create(ticket=ticket, actor=request.user, spec=spec)), status=201)
    active = request.GET.get("active", "")
    qs = selectors.grants_visible(user=request.user, active={"1": True, "0": False}.get(active))
    return JsonResponse([grant_json(g) for g in qs[:500]], safe=False)


@api_view("GET", "DELETE")
def grant_detail(request: HttpRequest, grant_id: int) -> JsonResponse:
    grant = _visible_grant(request, grant_id)
    if request.method == "DELETE":
        grant = grants.grant_revoke(grant=grant, actor=request.user)
    return JsonResponse(grant_json(grant))
