"""Who may do what, in every app: model permissions, checked with `user.has_perm`.

The permissions are declared on the models (`Meta.permissions`), so an admin can grant them to
any user or group in the Django admin. `manage.py setup_roles` creates the role groups that hold
them. Superusers have every permission; Django staff also count as observers.
"""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction

from .compiled import compiled

APPROVERS = "approvers"
AGENT_ADMINS = "agent admins"
STAFF_OBSERVERS = "staff observers"

DECIDE_TICKETS = "approvals.decide_tickets"  # declared on approvals.PendingCall
VIEW_ALL_SESSIONS = "agents_app.view_all_sessions"  # declared on agents_app.AdkSession
CONFIGURE_AGENTS = "agents_app.change_agentconfig"  # Django's own, on agents_app.AgentConfig
MANAGE_POLICIES = "approvals.change_policy"  # Django's own, on approvals.Policy (approval policies)

ROLE_PERMISSIONS: dict[str, tuple[str, ...]] = {
    APPROVERS: (DECIDE_TICKETS,),
    STAFF_OBSERVERS: (VIEW_ALL_SESSIONS,),
    # With staff status, an agent admin edits agents and approval policies in the Django admin (and
    # on the Policies page), sees and revokes standing grants, and nothing else.
    AGENT_ADMINS: tuple(
        f"{app}.{action}_{model}"
        for app, model in (
            ("agents_app", "agentconfig"),
            ("agents_app", "agenttoollink"),
            ("agents_app", "remoteapp"),
            ("approvals", "policy"),
        )
        for action in ("add", "change", "delete", "view")
    )
    + ("approvals.view_standinggrant", "approvals.change_standinggrant", "agents_app.view_agentconfigversion"),
}


def _has(user: Any, perm: str) -> bool:
    if not (user and user.is_authenticated):
        return False
    load_permissions(user)
    return bool(user.has_perm(perm))


# A user pk no row has, put in the query while it is compiled and found again among its parameters.
_SENTINEL = -7_301_555_000_000_029


def _permissions_sql() -> tuple[str, tuple]:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group, Permission
    from django.db.models import Q

    through = get_user_model().user_permissions.through
    direct = through.objects.filter(**{f"{through._meta.get_field('user').attname}": _SENTINEL})
    via_groups = Group.permissions.through.objects.filter(group__user=_SENTINEL)
    perms = Permission.objects.filter(
        Q(pk__in=direct.values("permission_id")) | Q(pk__in=via_groups.values("permission_id"))
    )
    sql, params = perms.values_list("content_type__app_label", "codename").order_by().query.sql_with_params()
    return sql, tuple(params)


def load_permissions(user: Any) -> None:
    """Read a person's model permissions (their own and their groups') in one query, compiled once
    per process, where Django's ModelBackend reads them in two on the first `has_perm` of a request.
    The set is the one ModelBackend would cache on the user object for the rest of the request
    (`_perm_cache`, which it then reads instead of querying): the same answers, one query fewer per
    page. Nothing is kept across requests: every request's user object reads its own. Superusers
    (Django answers True without a query), inactive users (no permissions) and a user object that
    already holds the set are left as they are."""
    statement = permissions_read(user)
    if statement is None:
        return
    with connection.cursor() as cursor:
        cursor.execute(*statement)
        permissions_loaded(user, cursor.fetchall())


def permissions_read(user: Any) -> tuple[str, list[Any]] | None:
    """`load_permissions`' statement (SQL, parameters) for this person, for a caller that sends it in
    the round trip of a read of its own (`compiled.rows_after`) and hands its rows to
    `permissions_loaded`; None when there is nothing to read (see `load_permissions`)."""
    if not (user and user.is_authenticated) or hasattr(user, "_perm_cache") or not user.is_active:
        return None
    if user.is_superuser:
        return None
    return permissions_of(user.pk)


def permissions_of(pk: Any) -> tuple[str, list[Any]]:
    """`permissions_read`'s statement for the person with this pk, whoever they are (a caller that reads
    their row in the same round trip: approvals.decider)."""
    sql, template = compiled("user_permissions", (), _permissions_sql)
    return sql, [pk if p == _SENTINEL else p for p in template]


def permissions_loaded(user: Any, rows: list[tuple]) -> None:
    """Keep the rows of `permissions_read`'s statement as the person's permissions for this request."""
    user._perm_cache = {f"{app_label}.{codename}" for app_label, codename in rows}


def is_approver(user: Any) -> bool:
    """Approvers decide every ticket."""
    return _has(user, DECIDE_TICKETS)


def is_agent_admin(user: Any) -> bool:
    return _has(user, CONFIGURE_AGENTS)


def is_policy_admin(user: Any) -> bool:
    """Edits approval policies (agent admins) and revokes anyone's standing grants."""
    return _has(user, MANAGE_POLICIES)


def is_observer(user: Any) -> bool:
    """Staff observers (and Django staff) watch every conversation."""
    return bool(user and user.is_authenticated and (user.is_staff or _has(user, VIEW_ALL_SESSIONS)))


def can_audit(user: Any) -> bool:
    """The audit trail (every decision, archived conversations' tickets): approvers, staff
    observers, agent admins and superusers; not requesters."""
    return is_approver(user) or is_observer(user) or is_agent_admin(user)


def can_retry_turns(user: Any, session: Any) -> bool:
    """The owner (their messages) and approvers (their answers) may run a failed turn again."""
    return bool(user and user.is_authenticated and (session.user_id == user.get_username() or is_approver(user)))


@transaction.atomic
def roles_setup() -> dict[str, Any]:
    """Create or refresh the role groups with exactly their permissions (idempotent; no users)."""
    from django.contrib.auth.models import Group, Permission
    from django.db.models import Q

    groups = {}
    for name, perms in ROLE_PERMISSIONS.items():
        wanted = Q(pk__in=[])
        for perm in perms:
            app_label, codename = perm.split(".", 1)
            wanted |= Q(content_type__app_label=app_label, codename=codename)
        found = list(Permission.objects.filter(wanted))
        if len(found) != len(perms):
            raise LookupError(f"The {name!r} role needs {', '.join(perms)}; some do not exist yet: run migrate first.")
        groups[name] = Group.objects.get_or_create(name=name)[0]
        groups[name].permissions.set(found)
    return groups
