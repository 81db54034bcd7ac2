"""Writes of a person's choices: their notification preferences and email address, their saved inbox views."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from .models import NotificationPreference, SavedView


def preferences_update(*, user: Any, email: str, email_enabled: bool, only_my_groups: bool) -> NotificationPreference:
    """Save a person's notification choices and email address."""
    with transaction.atomic():
        if user.email != email:
            user.email = email
            user.save(update_fields=["email"])
        prefs, _ = NotificationPreference.objects.update_or_create(
            user=user, defaults={"email_enabled": email_enabled, "only_my_groups": only_my_groups}
        )
    return prefs


MAX_SAVED_VIEWS = 20


class TooManyViews(Exception):
    """A person may keep MAX_SAVED_VIEWS views (the nav has room for that many)."""


def saved_view_save(*, user: Any, name: str, query: str) -> SavedView:
    """Save inbox filters under a name; the same name replaces its filters."""
    existing = SavedView.objects.filter(user=user, name=name).first()
    if existing is None and SavedView.objects.filter(user=user).count() >= MAX_SAVED_VIEWS:
        raise TooManyViews(f"You have {MAX_SAVED_VIEWS} saved views already; delete one first.")
    try:
        view, _ = SavedView.objects.update_or_create(user=user, name=name, defaults={"query": query})
    except IntegrityError:  # the same name saved twice at once: the other request won
        view = SavedView.objects.get(user=user, name=name)
    return view
