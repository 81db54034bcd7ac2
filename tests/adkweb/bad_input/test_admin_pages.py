"""The Django admin's lists, asked for a page they do not have (`?p=999`, `?p=0`, `?p=-1`): Django's list
redirected to `?e=1`, showing the first page without a word, and with `e=1` in the URL (a link that went
through that redirect once, or a bookmark of it) showed its "Database error" page with status 200,
which says nothing of a page and suggests the database failed. Now a 404 that says the page does not
exist and which pages the list has, on every registered model's list."""

from __future__ import annotations

import pytest
from django.contrib import admin

from tests.adkweb.bad_input.test_admin_lookups import admin_lists
from tests.adkweb.bad_input.test_surfaces import surface_counts
from tests.adkweb.security.sweep import World, world_create


@pytest.fixture
def world(demo) -> World:
    return world_create(demo)


@pytest.fixture
def one_per_page(monkeypatch):
    """Every list one row a page, so each list with two rows or more has a last page to go past."""
    for model_admin in admin.site._registry.values():
        monkeypatch.setattr(model_admin, "list_per_page", 1)


def test_admin_list_pages_past_the_end_are_404s_saying_so(world, one_per_page):
    c, lists = admin_lists(world)
    before = surface_counts()
    failures: list[str] = []
    paged = 0
    for model, base in lists:
        rows = model._default_manager.count()
        if rows < 2:
            continue
        paged += 1
        assert c.get(f"{base}?p={rows}").status_code == 200, base  # the last page
        for query in ("p=999", "p=999&e=1", f"p={rows + 1}&e=1", "p=0", "p=-1&e=1", "p=99999999999999999999"):
            r = c.get(f"{base}?{query}")
            text = r.content.decode(errors="replace")
            if r.status_code != 404 or "has no page" not in text or f"{rows} pages" not in text:
                failures.append(f"GET {base}?{query}: {r.status_code} {text[:200]!r}")
    assert not failures, "\n".join(failures)
    assert paged >= 5  # users, groups, agents, sessions, turns, ... at least
    assert surface_counts() == before


def test_admin_list_actions_on_ids_that_are_none_are_400s_saying_so(world):
    """A list's action (delete_selected) posted with a selected id that is not one (`_selected_action=x`,
    a page edited or a script's): Django's list filtered `pk__in` with it, a ValueError: a 500 on every
    model's list that has actions. Now a 400 saying the selection cannot be read; nothing deleted."""
    c, lists = admin_lists(world)
    before = surface_counts()
    failures: list[str] = []
    tried = 0
    for model, base in lists:
        if not admin.site._registry[model].get_actions(c.get(base).wsgi_request):
            continue
        tried += 1
        first = model._default_manager.values_list("pk", flat=True).first()
        for ids in (["x"], [str(first or 1), "x"], ["1.5"], ["%00"]):
            body = {"action": "delete_selected", "_selected_action": ids, "index": "0"}
            r = c.post(base, body)
            text = r.content.decode(errors="replace")
            if r.status_code != 400 or "cannot be read" not in text:
                failures.append(f"POST {base} {ids}: {r.status_code} {text[:160]!r}")
    assert not failures, "\n".join(failures)
    assert tried >= 10
    mallory = str(world.users["mallory"].pk)  # a selection of ids: Django's confirmation, as before
    r = c.post("/admin/auth/user/", {"action": "delete_selected", "_selected_action": [mallory], "index": "0"})
    assert r.status_code == 200 and "Are you sure" in r.content.decode()
    assert surface_counts() == before
