"""The Django admin's lists, refusing a filter of the URL that no database can apply with a 400 that says
so. A list reads any lookup on its model's own fields from the URL (`?created_at__year=0`, `?id__in=...`),
not only its filters' own; Django refuses those the ORM cannot build, but some fail only when the list is
counted: a year outside 1 to 9999 (ValueError, OverflowError), an id past a bigint (SQLite's driver:
OverflowError), a regular expression the database cannot read (PostgreSQL: DataError; SQLite runs
Python's `re` and reports its error as an OperationalError of the function). Each was a 500."""

from __future__ import annotations

import re
from typing import Any

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.db import DataError, OperationalError, transaction

from .errors import Invalid

# SQLite's report of an exception in a Python function of the query (the regexp lookups' `re`).
_FUNCTION_FAILED = re.compile(r"user-defined function raised exception")


def _why(exc: Exception) -> str:
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
        except OverflowError as exc:  # the date hierarchy's year past a C long (a ValueError: Django's redirect)
            raise _refused(exc) from exc

    def get_results(self, request: Any) -> None:
        try:
            with transaction.atomic(using=self.queryset.db):
                super().get_results(request)
        except (ValueError, OverflowError, DataError, OperationalError) as exc:
            if isinstance(exc, OperationalError) and not _FUNCTION_FAILED.search(str(exc)):
                raise  # the database itself failed: not the URL's fault
            raise _refused(exc) from exc


def _refused(exc: Exception) -> Invalid:
    return Invalid(
        f"A filter in this list's URL cannot be applied: {_why(exc)}. Remove it from the URL "
        "(or open the list again from the menu)."
    )


class CheckedLists:
    """Mixed into every ModelAdmin registered on the project's admin site: its list is a CheckedChangeList."""

    def get_changelist(self, request: Any, **kwargs: Any) -> type[ChangeList]:
        return CheckedChangeList


class CheckedAdminSite(admin.AdminSite):
    """The project's admin site (`admin.site`: adkweb.admin_app.AdminConfig): every model's admin registered on it
    (the project's, Django's user and group admins, django-axes') has CheckedLists mixed in.
    tests/adkweb/bad_input/test_admin_lookups.py tries every registered model."""

    def register(self, model_or_iterable: Any, admin_class: Any = None, **options: Any) -> None:
        cls = admin_class or admin.ModelAdmin
        if not issubclass(cls, CheckedLists):
            cls = type(cls.__name__, (CheckedLists, cls), {"__module__": cls.__module__})
        super().register(model_or_iterable, cls, **options)
