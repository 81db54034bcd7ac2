"""Table rows: approval policies and standing grants."""

from __future__ import annotations

from tests.adkweb.security.sweep import LOGIN, MISSING, PAGE_405, E, Target, World


def policy_targets(w: World) -> list[Target]:
    """Approval policies (agent admins only: none of these roles) and standing grants."""
    x, t = w.extras, w.call
    admins_only = E(LOGIN, 403, 403, 403, 403)
    api_admins_only = E(401, 403, 403, 403, 403)
    policy = {"name": "Hardware", "tool": "ask_for_approval", "condition": "amount > 5"}
    return [
        Target("policies page", "approvals:policies", "/policies/", False, {"GET": admins_only, "POST": PAGE_405}),
        Target(
            "new policy",
            "approvals:policy-new",
            "/policies/new/",
            False,
            {"GET": admins_only, "POST": admins_only},
            {"POST": {"name": "x", "required_approvals": "1", "priority": "0"}},
        ),
        Target(
            "policy page",
            "approvals:policy",
            f"/policies/{x.get('policy', 0)}/",
            False,
            {"GET": admins_only, "POST": admins_only},
            {"POST": {"name": "x", "required_approvals": "1", "priority": "0"}},
        ),
        Target("missing policy page", "approvals:policy", f"/policies/{MISSING}/", False, {"GET": admins_only}),
        Target(
            "policy delete",
            "approvals:policy-delete",
            f"/policies/{x.get('policy', 0)}/delete/",
            False,
            {"GET": PAGE_405, "POST": admins_only},
        ),
        Target(
            "policy dry run",
            "approvals:policy-dry-run",
            f"/policies/{x.get('policy', 0)}/dry-run/?last=5",
            False,
            {"GET": admins_only, "POST": PAGE_405},
        ),
        Target("grants page", "approvals:grants", "/grants/", False, {"GET": E(LOGIN, 200, 200, 200, 200)}),
        # The audit trail: approvers, staff observers and agent admins; never requesters.
        Target(
            "audit page", "approvals:audit", "/audit/", False, {"GET": E(LOGIN, 403, 403, 200, 200), "POST": PAGE_405}
        ),
        Target("audit CSV", "approvals:audit-csv", "/audit/export.csv", False, {"GET": E(LOGIN, 403, 403, 200, 200)}),
        Target(
            "audit JSON Lines",
            "approvals:audit-jsonl",
            "/audit/export.jsonl",
            False,
            {"GET": E(LOGIN, 403, 403, 200, 200)},
        ),
        Target(
            "grant revoke (the approver's grant on the requester's ticket)",
            "approvals:grant-revoke",
            f"/grants/{x.get('grant', 0)}/revoke/",
            False,
            {"GET": PAGE_405, "POST": E(LOGIN, 403, 404, 403, 302)},
        ),
        Target(
            "missing grant revoke",
            "approvals:grant-revoke",
            f"/grants/{MISSING}/revoke/",
            False,
            {"POST": E(LOGIN, 404, 404, 404, 404)},
        ),
        Target(
            "policies API",
            "approvals_api:policies",
            "/api/policies",
            True,
            {"GET": api_admins_only, "POST": api_admins_only, "DELETE": E(405, 405, 405, 405, 405)},
            {"POST": ("json", policy)},
        ),
        Target(
            "policy API",
            "approvals_api:policy",
            f"/api/policies/{x.get('policy', 0)}",
            True,
            {"GET": api_admins_only, "PATCH": api_admins_only, "PUT": api_admins_only, "DELETE": api_admins_only},
            {"PATCH": ("json", {"priority": 3}), "PUT": ("json", policy)},
        ),
        Target(
            "policy dry-run API",
            "approvals_api:policy-dry-run",
            f"/api/policies/{x.get('policy', 0)}/dry-run",
            True,
            {"GET": api_admins_only, "POST": E(405, 405, 405, 405, 405)},
        ),
        Target(
            "grants API",
            "approvals_api:grants",
            "/api/grants",
            True,
            # The world's ticket is open: who may give a grant from it gets as far as "not approved" (409).
            {"GET": E(401, 200, 200, 200, 200), "POST": E(401, 403, 404, 403, 409)},
            {"POST": ("json", {"ticket": t.pk, "scope": "user", "minutes": 30})},
        ),
        Target(
            "grant API",
            "approvals_api:grant",
            f"/api/grants/{x.get('grant', 0)}",
            True,
            {"GET": E(401, 200, 404, 200, 200), "DELETE": E(401, 403, 404, 403, 200)},
        ),
        Target(
            "missing grant API",
            "approvals_api:grant",
            f"/api/grants/{MISSING}",
            True,
            {"GET": E(401, 404, 404, 404, 404), "DELETE": E(401, 404, 404, 404, 404)},
        ),
    ]
