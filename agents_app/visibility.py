"""Who may read which conversation: its page, socket, timeline and artifacts, and the lists.

Observers (and superusers) see every conversation; its requester sees their own; anyone else sees a
conversation whose every ticket they may see (approvals.permissions decides per ticket), since a
conversation shows its tickets' arguments. `sessions_visible_to` is the list's queryset,
`session_visible` the check a page or socket makes for one conversation.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet

from adkweb.compiled import exists_by_pk
from adkweb.roles import is_approver, is_observer

from .models import AdkSession


def _sees_everything(user: Any) -> bool:
    return bool(user and user.is_authenticated and (user.is_superuser or is_observer(user)))


def _through_tickets_q(user: Any) -> Q:
    """Conversations a person who is not their requester may read because of their tickets: none
    of its tickets is hidden from them (approvals.permissions: policy approver groups, escalation
    groups once escalated, the approvers role for tickets no policy routes), and at least one is
    theirs to see, or, for approvers, none at all. A conversation shows its tickets' arguments (the
    calls, the agent's words), so one ticket routed elsewhere hides the whole conversation."""
    from approvals.models import PendingCall
    from approvals.permissions import visible_q

    tickets = PendingCall.objects.filter(session=OuterRef("pk"))
    visible = visible_q(user)
    hidden = Exists(tickets.exclude(visible))
    if is_approver(user):
        return ~Q(hidden)
    return ~Q(hidden) & Q(Exists(tickets.filter(visible)))


def sessions_visible_to(user: Any) -> QuerySet:
    """Observers (and superusers) see every conversation; the requester their own; anyone else a
    conversation whose every ticket they may see (`_through_tickets_q`)."""
    qs = AdkSession.objects.all()
    if not user or not user.is_authenticated:
        return qs.none()
    if _sees_everything(user):
        return qs
    if is_approver(user):
        return qs.filter(Q(user_id=user.get_username()) | ~Q(pk__in=_sessions_hiding_tickets(user)))
    return qs.filter(Q(user_id=user.get_username()) | _through_tickets_q(user))


def _sessions_hiding_tickets(approver: Any) -> QuerySet:
    """The conversations (live ones: the default manager's) with a ticket hidden from this approver,
    as `_through_tickets_q` defines it: approvers see every ticket no policy routes, so only routed
    tickets can be hidden from them (the partial index ticket_routed_session holds those), and the
    list reads them once rather than the tickets of each conversation it walks."""
    from approvals.models import PendingCall
    from approvals.permissions import ticket_scope_q

    return PendingCall.objects.filter(routed=True).exclude(ticket_scope_q(approver)).values("session_id")


def session_visible(user: Any, session: AdkSession) -> bool:
    """Whether this person may read this conversation (its page, socket, timeline, artifacts)."""
    if not user or not user.is_authenticated:
        return False
    if _sees_everything(user) or session.user_id == user.get_username():
        return True
    # all_objects: an archived conversation's tickets keep their pages (its own pages are gone anyway).
    # Compiled once per way of seeing tickets (what _through_tickets_q depends on): pages ask it each time.
    from approvals.selectors import visibility_key

    def build(pk: int) -> QuerySet:
        return AdkSession.all_objects.filter(_through_tickets_q(user), pk=pk)

    return exists_by_pk(("session_visible", *visibility_key(user)), build, session.pk)
