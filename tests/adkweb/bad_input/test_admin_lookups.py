"""The Django admin's lists read any lookup on a model's own fields from the URL (`?created_at__year=0`,
`?id__in=...`), not only those of its filters. Some pass the ORM and fail only when the list is counted:
a year past the calendar (`year 0 is out of range`, OverflowError), an id past a bigint in `__in`
(SQLite's OverflowError), a regular expression the database cannot read (PostgreSQL's DataError): each
was a 500 on every model's list (the project's, Django's users and groups, django-axes'). Now a 400
saying a filter of the URL cannot be applied, and why (or the list, where the database can apply it).
A year Django's date hierarchy cannot read (0, -1) was already refused its way: a redirect to ?e=1."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.db import models
from django.test import Client

from tests.adkweb.bad_input.test_surfaces import surface_counts
from tests.adkweb.security.sweep import World, world_create

PAST = "99999999999999999999"


def lookups(model: type[models.Model]) -> list[str]:
    """Each unusable lookup the model's own fields take."""
    fields = model._meta.concrete_fields
    dated = next((f.name for f in fields if isinstance(f, models.DateField)), None)
    text = next((f.name for f in fields if isinstance(f, models.CharField) and f.name != "password"), None)
    out = [f"pk__in={PAST}", f"pk__in=1,{PAST}"]
    if dated:
        out += [f"{dated}__year=0", f"{dated}__year=-1", f"{dated}__year={PAST}", f"{dated}__iso_year=10000"]
    if text and model._default_manager.exists():  # a regular expression is only read on a row
        out += [f"{text}__regex=(", f"{text}__iregex=[z-a]"]
    return out


@pytest.fixture
def world(demo) -> World:
    return world_create(demo)


def test_admin_list_lookups_no_database_can_apply_are_400s(world):
    c = Client()
    c.force_login(world.users["admin"])
    before = surface_counts()
    failures: list[str] = []
    refused = 0
    for model in admin.site._registry:
        base = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        assert c.get(base).status_code == 200, base
        for lookup in lookups(model):
            for query in (lookup, f"{lookup}&_facets=1"):
                r = c.get(f"{base}?{query}")
                text = r.content.decode(errors="replace")
                if r.status_code == 200 or (r.status_code == 302 and r["Location"].endswith("?e=1")):
                    continue  # the database could apply it (PostgreSQL: ids past a bigint), or Django refused it
                if r.status_code != 400 or "cannot be applied" not in text:
                    failures.append(f"GET {base}?{query}: {r.status_code} {text[:160]!r}")
                refused += r.status_code == 400
    assert not failures, "\n".join(failures)
    assert refused >= len(admin.site._registry)  # at least the year past a C long, on every database
    assert surface_counts() == before
