"""The Django admin's lists, refusing a filter of the URL that no database can apply with a 400 that says
so. A list reads any lookup on its model's own fields from the URL (`?created_at__year=0`, `?id__in=...`),
not only its filters' own; Django refuses those the ORM cannot build, but some fail only when the list is
counted: a year outside 1 to 9999 (ValueError, OverflowError), an id past a bigint (SQLite's driver:
OverflowError), a regular expression the database cannot read (PostgreSQL: DataError; SQLite runs
Python's `re` and reports its error as an OperationalError of the function). Each was a 500. A lookup Django
refuses itself is the same 400, saying why: one it cannot build (`?created_at__year=0`, `?created_at__date=x`,
`?nope=1`: Django's redirect to `?e=1`, which dropped the filter, or its "Database error" page, status 200,
when `e=1` was in the URL) and one the admin does not allow (`?groups__name=x`, `?_to_field=password`:
Django's bare "Bad Request (400)")."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from functools import update_wrapper
from typing import Any, TypeVar, cast

from django.contrib import admin
from django.contrib.admin.exceptions import DisallowedModelAdminLookup, DisallowedModelAdminToField
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import PAGE_VAR, ChangeList
from django.core.exceptions import ValidationError
from django.db import DataError, OperationalError, transaction

from .errors import Invalid, NotFound

V = TypeVar("V", bound=Callable[..., Any])

# SQLite's report of an exception in a Python function of the query (the regexp lookups' `re`).
_FUNCTION_FAILED = re.compile(r"user-defined function raised exception")


def _why(exc: Exception) -> str:
    if isinstance(exc, IncorrectLookupParameters) and exc.args and isinstance(exc.args[0], Exception):
        exc = exc.args[0]  # what Django's ORM (or Python's datetime) said
    if isinstance(exc, ValidationError):
        return " ".join(exc.messages)
    if isinstance(exc, OverflowError):
        return "a number past the largest a database column holds"
    if isinstance(exc, OperationalError):
        return "a regular expression that cannot be read"
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


class CheckedChangeList(ChangeList):
    """Django's list, its filters applied and its rows counted in a savepoint: a filter of the URL the
    database (or Python's datetime, for the date hierarchy's year) refuses is a 400 naming why, and the
    request's transaction, if any, goes on."""

    def get_queryset(self, request: Any, exclude_parameters: Any = None) -> Any:
        try:
            return super().get_queryset(request, exclude_parameters)
        except (OverflowError, IncorrectLookupParameters) as exc:  # Django's: a redirect to ?e=1, dropping the filter
            raise _refused(exc) from exc

    def get_results(self, request: Any) -> None:
        try:
            with transaction.atomic(using=self.queryset.db):
                super().get_results(request)
        except (ValueError, OverflowError, DataError, OperationalError) as exc:
            if isinstance(exc, OperationalError) and not _FUNCTION_FAILED.search(str(exc)):
                raise  # the database itself failed: not the URL's fault
            raise _refused(exc) from exc
        except IncorrectLookupParameters as exc:  # Django's: the page past the end (or below 1), a redirect to ?e=1
            raise self._no_page(request) from exc

    def _no_page(self, request: Any) -> NotFound:
        pages = self.model_admin.get_paginator(request, self.queryset, self.list_per_page).num_pages
        return NotFound(
            f"This list has no page {self.page_num}: it has {pages} pages. Open its first page "
            f"({self.get_query_string({PAGE_VAR: 1})}) or its last ({self.get_query_string({PAGE_VAR: pages})})."
        )


def _refused(exc: Exception) -> Invalid:
    return Invalid(
        f"A filter in this list's URL cannot be applied: {_why(exc).rstrip('.')}. Remove it from the URL "
        "(or open the list again from the menu)."
    )


class CheckedLists:
    """Mixed into every ModelAdmin registered on the project's admin site: its list is a CheckedChangeList,
    and its actions refuse a selection whose ids are none."""

    model: Any

    def get_changelist(self, request: Any, **kwargs: Any) -> type[ChangeList]:
        return CheckedChangeList

    def response_action(self, request: Any, queryset: Any) -> Any:
        """Django's, once every selected id reads as one: an id that is not (`_selected_action=x`) reached
        `pk__in`, a ValueError, a 500 on every list with actions."""
        pk = self.model._meta.pk
        for raw in request.POST.getlist(ACTION_CHECKBOX_NAME):
            try:
                pk.get_prep_value(pk.to_python(raw))
            except (ValidationError, ValueError, TypeError) as exc:
                raise Invalid(
                    f"The selected rows cannot be read: {raw[:40]!r} is not an id of this list. Nothing was "
                    "changed. Select the rows in the list again."
                ) from exc
        return super().response_action(request, queryset)  # type: ignore[misc]


class CheckedAdminSite(admin.AdminSite):
    """The project's admin site (`admin.site`: adkweb.admin_app.AdminConfig): every model's admin registered on it
    (the project's, Django's user and group admins, django-axes') has CheckedLists mixed in.
    tests/adkweb/bad_input/test_admin_lookups.py tries every registered model."""

    def register(self, model_or_iterable: Any, admin_class: Any = None, **options: Any) -> None:
        cls = admin_class or admin.ModelAdmin
        if not issubclass(cls, CheckedLists):
            cls = type(cls.__name__, (CheckedLists, cls), {"__module__": cls.__module__})
        super().register(model_or_iterable, cls, **options)

    def admin_view(self, view: V, cacheable: bool = False) -> V:
        """Every admin view, a lookup or a `_to_field` the admin does not allow answered as the lists' other
        refusals (Django's: a bare "Bad Request (400)"), still logged where Django logs it."""

        def refusing(request: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return view(request, *args, **kwargs)
            except (DisallowedModelAdminLookup, DisallowedModelAdminToField) as exc:
                logging.getLogger(f"django.security.{type(exc).__name__}").warning(str(exc))
                if isinstance(exc, DisallowedModelAdminLookup):
                    raise _refused(exc) from exc
                raise Invalid(
                    f"The URL's _to_field cannot be used: {exc} Remove it from the URL (or open the page again "
                    "from the menu)."
                ) from exc

        return super().admin_view(cast(V, update_wrapper(refusing, view)), cacheable)
