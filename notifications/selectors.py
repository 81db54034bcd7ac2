"""Reads of notifications: who is told what, delivery status for a ticket, saved views."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import DatabaseError, transaction
from django.db.models import Prefetch, QuerySet, prefetch_related_objects

from adkweb import compiled, compiled_objects
from approvals.selectors import ticket_approver_groups, ticket_deciders

from .events import EMAIL_DECIDERS, EMAIL_REQUESTER, TICKET_OPENED
from .models import Delivery, DeliveryAttempt, NotificationEvent, NotificationPreference, SavedView, WebhookEndpoint


def preferences_for(user: Any) -> NotificationPreference:
    """A person's preferences (the defaults when they never saved any)."""
    prefs = NotificationPreference.objects.filter(user=user).first()
    return prefs or NotificationPreference(user=user)


def preferences_of(people: list[Any]) -> dict[int, NotificationPreference]:
    """The saved preferences of these people by user id, in one query (those who never saved any
    are missing: `unwanted_reason` takes None for the defaults). Asked by every fan-out and every
    claim of emails: compiled once per process for each count of people up to `_COMPILED_UP_TO`
    (a ticket's deciders), the ORM's query compiled per call beyond."""
    ids = [p.pk for p in people]
    if not ids:
        return {}
    if len(ids) > _COMPILED_UP_TO:
        return {pref.user_id: pref for pref in NotificationPreference.objects.filter(user__in=ids)}
    found = compiled.instances(NotificationPreference, f"preferences_of:{len(ids)}", _preferences_of, *ids)
    return {pref.user_id: pref for pref in found}


_COMPILED_UP_TO = 16


def _preferences_of(*ids: int) -> QuerySet:
    return NotificationPreference.objects.filter(user__in=ids)


def email_recipients(*, event: NotificationEvent) -> list[tuple[Any, str]]:
    """(person, role) pairs to email for an event: the ticket's deciders, or its requester."""
    ticket = event.ticket
    if ticket is None:
        return []
    if event.name in EMAIL_DECIDERS:
        people, role = ticket_deciders(ticket=ticket), "decider"
    elif event.name in EMAIL_REQUESTER:
        people = list(get_user_model().objects.filter(username=ticket.requester, is_active=True))
        people = [p for p in people if p.pk != ticket.closed_by_id]  # nobody is emailed about their own decision
        role = "requester"
    else:
        return []
    if not people:
        return []
    prefs = preferences_of(people)
    groups = set(ticket_approver_groups(ticket=ticket))
    return [
        (person, role)
        for person in people
        if not unwanted_reason(person, role, prefs.get(person.pk), groups=groups, ticket=ticket)
    ]


def unwanted_reason(
    person: Any, role: str, pref: NotificationPreference | None, *, ticket: Any, groups: set[str] | None = None
) -> str:
    """Why this person does not want this email now (no address, email off, or "only tickets of my
    groups" and the ticket is routed elsewhere), or "": asked at fan-out and again at sending."""
    pref = pref or NotificationPreference(user=person)
    if not person.email:
        return "The person has no email address."
    if not pref.email_enabled:
        return "The person turned ticket emails off."
    if role == "decider" and pref.only_my_groups:
        groups = set(ticket_approver_groups(ticket=ticket)) if groups is None else groups
        if not groups & set(person.groups.values_list("name", flat=True)):
            return "The person asked for emails about tickets of their groups only."
    return ""


def emails_may_be_owed(*, event_name: str, ticket: Any) -> bool:
    """Whether an event may owe emails, known without a query: not when it has no ticket, nor for
    the requester's email about a decision the requester made themselves (nobody is emailed about
    their own decision). A ticket's deciders are never assumed away: the fan-out finds them."""
    if ticket is None:
        return False
    if event_name in EMAIL_DECIDERS:
        return True
    return event_name in EMAIL_REQUESTER and not _own_decision(ticket)


def _own_decision(ticket: Any) -> bool:
    """The ticket was closed by its requester, as `email_recipients` matches them (the username;
    unique): known when the caller has the closer loaded (a decision does), else not assumed."""
    if ticket.closed_by_id is None or not type(ticket).closed_by.is_cached(ticket):
        return False
    return getattr(ticket.closed_by, "username", None) == ticket.requester


def webhook_endpoints_for(*, event_name: str, in_savepoint: bool = False) -> list[WebhookEndpoint]:
    """Enabled endpoints subscribed to an event (events is a small JSON list: filtered here, not in SQL).
    Asked by every notification (`_nothing_owed`, the fan-out's plan): compiled once per process.
    `in_savepoint`: read in a savepoint of the caller's transaction (a failed read raises and leaves that
    transaction usable); on PostgreSQL inside a transaction the savepoint, the read and the release go
    in one round trip (one query string: a decision's notice asks this before its COMMIT)."""
    if not in_savepoint:
        enabled = compiled.instances(WebhookEndpoint, "webhook_endpoints_enabled", _enabled_endpoints)
    else:
        enabled = _enabled_in_savepoint()
    return [e for e in enabled if event_name in (e.events or [])]


def webhook_endpoints_subscribed_sql(*, event_name: str) -> tuple[str, list[Any]]:
    """`bool(webhook_endpoints_for(event_name=...))` as an SQL condition and its parameters, for a caller
    that asks it in its own statement (PostgreSQL: the events list as jsonb, `@>` the one name: what the
    Python filter of `webhook_endpoints_for` keeps); compiled once per process and event name."""

    def build() -> tuple[str, list[Any]]:
        subscribed = _enabled_endpoints().filter(events__contains=[event_name]).values("id")
        sql, params = subscribed.query.sql_with_params()
        return f"EXISTS ({sql})", list(params)

    return compiled.compiled("webhook_endpoints_subscribed_sql", (event_name,), build)


_SAVEPOINT = "adkweb_endpoints"


def _enabled_in_savepoint() -> list[WebhookEndpoint]:
    db = transaction.get_connection()
    if db.vendor == "sqlite":  # a failed statement undoes itself on SQLite, not its transaction: no savepoint
        return compiled.instances(WebhookEndpoint, "webhook_endpoints_enabled", _enabled_endpoints)
    if db.vendor != "postgresql" or not db.in_atomic_block:
        with transaction.atomic():
            return compiled.instances(WebhookEndpoint, "webhook_endpoints_enabled", _enabled_endpoints)
    try:
        return compiled.instances(
            WebhookEndpoint,
            "webhook_endpoints_enabled",
            _enabled_endpoints,
            lead=(f"SAVEPOINT {_SAVEPOINT}", []),
            trail=f"RELEASE SAVEPOINT {_SAVEPOINT}",
        )
    except DatabaseError:
        with db.cursor() as cursor:
            cursor.execute(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}; RELEASE SAVEPOINT {_SAVEPOINT}")
        raise


def _enabled_endpoints() -> QuerySet:
    return WebhookEndpoint.objects.filter(enabled=True)


def _deliveries(ticket_id: int) -> QuerySet[Delivery]:
    return (
        Delivery.objects.filter(ticket_id=ticket_id)
        .select_related("event", "recipient", "endpoint")
        .order_by("created_at", "id")
    )


def ticket_deliveries(*, ticket_id: int) -> list[Delivery]:
    """A ticket's deliveries, oldest first, with their attempts (the query compiled once per connection)."""
    found = compiled_objects.objects("ticket_deliveries", (), _deliveries, ticket_id)
    prefetch_related_objects(found, Prefetch("attempt_log", queryset=DeliveryAttempt.objects.order_by("number")))
    return found


@dataclass(frozen=True)
class DeliverySummary:
    """The ticket page's one line, e.g. "emailed 3 approvers · webhook delivered"."""

    parts: list[str]
    problem: bool

    def __str__(self) -> str:
        return " · ".join(self.parts)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def delivery_summary(deliveries: list[Delivery]) -> DeliverySummary:
    """Summarise deliveries: emails by outcome, and each webhook endpoint by its latest delivery."""
    parts: list[str] = []
    emails = [d for d in deliveries if d.channel == Delivery.Channel.EMAIL]
    deciders = {d.recipient_id for d in emails if d.role == "decider" and d.status == Delivery.Status.DELIVERED}
    if deciders:
        parts.append(f"emailed {_plural(len(deciders), 'approver')}")
    if any(d.role == "requester" and d.status == Delivery.Status.DELIVERED for d in emails):
        parts.append("emailed the requester")
    waiting = sum(d.status in (*Delivery.OWED, Delivery.Status.SENDING) for d in emails)
    failed = sum(d.status == Delivery.Status.FAILED for d in emails)
    if waiting:
        parts.append(f"{_plural(waiting, 'email')} on the way")
    if failed:
        parts.append(f"{_plural(failed, 'email')} failed")
    latest: dict[Any, Delivery] = {}
    for d in deliveries:
        if d.channel == Delivery.Channel.WEBHOOK:
            latest[d.endpoint_id or d.target] = d
    by_state: dict[str, int] = {}
    for d in latest.values():
        state = {"pending": "sending", "sending": "sending", "retrying": "retrying"}.get(d.status, d.status)
        by_state[state] = by_state.get(state, 0) + 1
    for state in ("delivered", "sending", "retrying", "failed", "skipped"):
        if by_state.get(state):
            n = by_state[state]
            parts.append(f"{'webhook' if n == 1 else f'{n} webhooks'} {state}")
    return DeliverySummary(parts=parts, problem=bool(failed or by_state.get("failed") or by_state.get("retrying")))


def delivery_target_label(delivery: Delivery) -> str:
    """Who or what a delivery goes to, as a page may show it (a webhook's name, never its URL)."""
    if delivery.channel == Delivery.Channel.WEBHOOK:
        return delivery.endpoint.label if delivery.endpoint else "a deleted webhook"
    return delivery.recipient.get_username() if delivery.recipient else "a deleted user"


def ticket_has_pending_fan_out(*, ticket_id: int) -> bool:
    return NotificationEvent.objects.filter(ticket_id=ticket_id, fanned_out_at__isnull=True).exists()


def ticket_was_announced(*, ticket_id: int) -> bool:
    return NotificationEvent.objects.filter(ticket_id=ticket_id, name=TICKET_OPENED).exists()


def saved_views_for(user: Any) -> list[SavedView]:
    if not user or not user.is_authenticated:
        return []
    # Every page an approver opens shows them (the nav): built and compiled once per process, then executed.
    build = lambda pk: SavedView.objects.filter(user_id=pk).order_by("name", "pk")  # noqa: E731
    return compiled.instances(SavedView, "saved_views_for", build, user.pk)
