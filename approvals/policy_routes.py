"""Route table of the policies and grants API (mounted under /api/ with the tickets' table) and its
response models: the URL patterns and the OpenAPI document are generated from it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from adkweb.routes import Op, Route

from . import policy_api


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PolicyOut(_Out):
    """An approval policy: which tickets it matches and the rules it gives them."""

    id: int
    name: str
    agent: str | None
    tool: str | None
    kind: str | None
    condition: str
    priority: int
    approverGroups: list[str]  # the API's own camelCase
    escalationGroups: list[str]
    requiredApprovals: int
    fourEyes: bool
    autoDecision: str | None
    autoReason: str
    autoConfirmations: bool
    dueInSeconds: int | None
    remindBeforeSeconds: int | None
    escalateAfterSeconds: int | None
    allowGrants: bool
    enabled: bool
    version: int


class Deleted(_Out):
    deleted: int


class PassedOverPolicy(_Out):
    """A policy that would have approved the ticket at once, passed over: its condition could not be
    decided on the arguments (a person decides instead)."""

    name: str
    version: int | None
    why: str


class DryRunTicket(_Out):
    id: int
    status: str
    wouldBe: str
    passedOver: list[PassedOverPolicy] = Field(
        description="As the ticket's own passedOver: the policies that would have approved it at once, passed "
        "over as their condition could not be decided on its arguments (this one's too: wouldBe 'passed over')."
    )


class DryRunOut(_Out):
    """What the policy would have done to the last N closed tickets (nothing is changed)."""

    policy: int
    version: int
    considered: int
    matched: int
    wouldApply: int
    autoApproved: int
    autoRejected: int
    routedTo: dict[str, int]
    expired: int
    fourEyesRefused: int
    tooFewApprovals: int
    passedOver: int = Field(
        description="Tickets it would approve at once but whose arguments its condition could not be decided on: "
        "it is passed over for them and a person decides (as when a ticket opens)."
    )
    tickets: list[DryRunTicket]


class GrantOut(_Out):
    """A standing grant: matching tickets are approved at once while it lasts."""

    id: int
    scope: str
    agent: str
    tool: str
    kind: str
    requester: str
    session: str | None
    policy: int | None
    ticket: int
    createdBy: str
    createdAt: str | None
    expiresAt: str | None
    revokedAt: str | None
    revokedBy: str | None
    revokedReason: str  # why, when nobody revoked it by hand (e.g. a duplicate ended by a migration); else ""
    active: bool
    approvedTickets: int


ADMIN_ERRORS = (400, 401, 403)
ROUTES = [
    Route(
        "policies",
        policy_api.policy_list,
        "policies",
        (
            Op(
                "GET",
                "Every approval policy, highest priority first (agent admins)",
                response=list[PolicyOut],
                errors=(401, 403),
            ),
            Op(
                "POST",
                "Create a policy (agent admins); an invalid condition is refused with 400",
                request=policy_api.PolicyBody,
                response=PolicyOut,
                errors=ADMIN_ERRORS,
                status=201,
            ),
        ),
    ),
    Route(
        "policies/<int:policy_id>",
        policy_api.policy_detail,
        "policy",
        (
            Op("GET", "A policy (agent admins)", response=PolicyOut, errors=(401, 403, 404)),
            Op(
                "PUT",
                "Replace a policy (absent fields: defaults)",
                request=policy_api.PolicyBody,
                response=PolicyOut,
                errors=(400, 401, 403, 404),
            ),
            Op(
                "PATCH",
                "Change some fields of a policy",
                request=policy_api.PolicyBody,
                response=PolicyOut,
                errors=(400, 401, 403, 404),
            ),
            Op(
                "DELETE",
                "Delete a policy: its tickets keep their rules, its grants end",
                response=Deleted,
                errors=(401, 403, 404),
            ),
        ),
    ),
    Route(
        "policies/<int:policy_id>/dry-run",
        policy_api.policy_dry_run,
        "policy-dry-run",
        (
            Op(
                "GET",
                "What the policy would have done to the last N closed tickets (changes nothing)",
                response=DryRunOut,
                query={"last": "how many closed tickets, newest first (1 to 1000, default 100)"},
                errors=(400, 401, 403, 404),
            ),
        ),
    ),
    Route(
        "grants",
        policy_api.grant_list,
        "grants",
        (
            Op(
                "GET",
                "Standing grants of tickets you may see, newest first",
                response=list[GrantOut],
                query={"active": "1: only grants in force; 0: only ended or revoked ones"},
                errors=(401,),
            ),
            Op(
                "POST",
                "Give a standing grant from a ticket you may decide",
                request=policy_api.GrantBody,
                response=GrantOut,
                errors=(400, 401, 403, 404, 409),
                status=201,
            ),
        ),
    ),
    Route(
        "grants/<int:grant_id>",
        policy_api.grant_detail,
        "grant",
        (
            Op("GET", "A standing grant", response=GrantOut, errors=(401, 404)),
            Op(
                "DELETE",
                "Revoke a grant (its giver or an agent admin); the record stays",
                response=GrantOut,
                errors=(401, 403, 404, 409),
            ),
        ),
    ),
]
