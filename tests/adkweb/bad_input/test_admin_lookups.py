"""The Django admin's lists read any lookup on a model's own fields from the URL (`?created_at__year=0`,
`?id__in=...`), not only those of its filters. Some pass the ORM and fail only when the list is counted:
a year past the calendar (`year 0 is out of range`, OverflowError), an id past a bigint in `__in`
(SQLite's OverflowError), a regular expression the database cannot read (PostgreSQL's DataError): each
was a 500 on every model's list (the project's, Django's users and groups, django-axes'). Now a 400
saying a filter of the URL cannot be applied, and why (or the list, where the database can apply it).
So are the lookups Django refused its own way: one it cannot build (a year 0, a month 13 in the date
hierarchy, `__date=garbage`, a field the model does not have) redirected to `?e=1`, dropping the filter
without a word, and with `e=1` already in the URL showed Django's "Database error" page (status 200); a
lookup across a relation the admin does not filter by, or a `_to_field` it does not allow, was Django's
bare "Bad Request (400)"."""

from __future__ import annotations

from collections.abc import Callable

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
    out.append("no_such_field=1")
    if dated:
        out += [f"{dated}__year=0", f"{dated}__year=-1", f"{dated}__year={PAST}", f"{dated}__iso_year=10000"]
        out += [f"{dated}__iso_year=0", f"{dated}__month=13", f"{dated}__day=0", f"{dated}__week=0"]
        out += [f"{dated}__month={PAST}", f"{dated}__week=x", f"{dated}__gte=garbage"]
        if isinstance(model._meta.get_field(dated), models.DateTimeField):
            out.append(f"{dated}__date=garbage")
    if text and model._default_manager.exists():  # a regular expression is only read on a row
        out += [f"{text}__regex=(", f"{text}__iregex=[z-a]"]
    return out


@pytest.fixture
def world(demo) -> World:
    return world_create(demo)


def admin_lists(world: World) -> tuple[Client, list[tuple[type[models.Model], str]]]:
    """A client logged in as the admin, and every registered model with its list's URL."""
    c = Client()
    c.force_login(world.users["admin"])
    return c, [(m, f"/admin/{m._meta.app_label}/{m._meta.model_name}/") for m in admin.site._registry]


def refusals(world: World, queries: Callable[[type[models.Model]], list[str]], *said: str) -> int:
    """GET every registered model's list with each of `queries(model)`: each answered with the list (the
    database applied it) or a 400 saying one of `said`, never Django's "Database error" page or its bare
    400; nothing changed. How many were refused."""
    c, lists = admin_lists(world)
    before = surface_counts()
    failures: list[str] = []
    refused = 0
    for model, base in lists:
        assert c.get(base).status_code == 200, base
        for query in queries(model):
            r = c.get(f"{base}?{query}")
            text = r.content.decode(errors="replace")
            if r.status_code == 200 and "Database error" not in text:
                continue  # the database could apply it (PostgreSQL: ids past a bigint; a month 13 finds none)
            if r.status_code != 400 or not any(words in text for words in said):
                failures.append(f"GET {base}?{query}: {r.status_code} {text[:160]!r}")
            refused += r.status_code == 400
    assert not failures, "\n".join(failures)
    assert surface_counts() == before
    return refused


def test_admin_list_lookups_no_database_can_apply_are_400s(world):
    def queries(model: type[models.Model]) -> list[str]:
        return [q for lookup in lookups(model) for q in (lookup, f"{lookup}&_facets=1", f"{lookup}&e=1")]

    refused = refusals(world, queries, "cannot be applied")
    assert refused >= len(admin.site._registry)  # at least the year past a C long, on every database


def test_admin_lookups_and_to_fields_the_admin_does_not_allow_are_400s_saying_so(world):
    """Across a relation no filter of the list names (`?groups__name=x`), a password, a `_to_field` that is
    not unique: a 400 with the lists' message, not Django's bare "Bad Request (400)"."""

    def queries(model: type[models.Model]) -> list[str]:
        out = ["_to_field=no_such_field"]
        for f in model._meta.get_fields():
            if f.is_relation and f.concrete and f.related_model is not None:
                other = next(o.name for o in f.related_model._meta.concrete_fields if not o.primary_key)
                out.append(f"{f.name}__{other}=x")
        if model._meta.model_name == "user":
            out.append("password__startswith=pbkdf2")
        return out

    refused = refusals(world, queries, "cannot be applied", "cannot be used")
    assert refused >= len(admin.site._registry)  # at least the _to_field of every list


def test_a_refusal_shows_the_urls_text_as_text_not_markup(world):
    """A refusal quotes what the URL said (a lookup, a `_to_field`, a date): it reached the page as markup,
    so a link to the admin with `?_to_field=<script>...` ran its script in an admin's session. Now the
    refusal's text is escaped: the page shows the characters, no element is made of them."""
    c = Client()
    c.force_login(world.users["admin"])
    for query in ("_to_field=<script>alert(1)</script>", "groups__<b>x=1", "<b>x=1", "date_joined__date=<b>"):
        r = c.get("/admin/auth/user/", QUERY_STRING=query.replace("<", "%3C").replace(">", "%3E"))
        text = r.content.decode()
        assert r.status_code == 400, (query, r.status_code)
        assert "<script>" not in text and "<b>" not in text, (query, text)
        assert "&lt;script&gt;" in text or "&lt;b&gt;" in text, (query, text)
