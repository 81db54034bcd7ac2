"""Error pages in the site's look, with a way back (DEBUG off, as deployed). Before: a page path no view has
was Django's bare "Not Found" (an <h1> and a line, no menu, no link), a 500 its "Server Error (500)", a
bad request its "Bad Request (400)", a 403 "403 Forbidden", and a CSRF failure Django's page about "CSRF
verification" and Referer headers, with nothing a person could act on; to an htmx button the CSRF page
was a 403 htmx swaps nowhere: the click did nothing visible. /api/'s 404 stays JSON (610e5ba)."""

from __future__ import annotations

import pytest
from django.test import Client, RequestFactory
from django.views import defaults

from tests.adkweb.bad_input.sweep import Objs, _client

LOOK = ('class="topbar"', "css/app.css")  # base.html's header and stylesheet
WAY_BACK = ('href="/"', 'href="/accounts/login/"')


def page(r, status: int, *said: str) -> str:
    text = r.content.decode()
    assert r.status_code == status, (r.status_code, text[:300])
    for words in (*LOOK, *WAY_BACK, *said):
        assert words in text, (words, text[:600])
    return text


@pytest.mark.parametrize("who", ["requester", "anonymous"])
def test_a_page_path_no_view_has_is_a_404_page_with_a_way_back(objs: Objs, who: str):
    c = Client() if who == "anonymous" else _client(objs, who)
    text = page(c.get("/no-such-page/"), 404, "Page not found", "/no-such-page/")
    assert ("Conversations" in text) == (who != "anonymous")  # the menu of one who is logged in
    if who != "anonymous":
        page(c.get("/tickets/999999999/"), 404, "Page not found")  # a view's Http404
    r = c.get("/api/no-such-endpoint")
    assert r.status_code == 404 and "no API endpoint" in r.json()["detail"]


def test_the_500_page_has_the_look_and_reads_no_database(objs: Objs, settings, django_db_blocker):
    settings.ROOT_URLCONF = "tests.adkweb.bad_input.error_urls"
    c = _client(objs, "requester")
    c.raise_request_exception = False
    page(c.get("/fails/"), 500, "Something went wrong", "reload the page")
    with django_db_blocker.block():  # the database down: the page still renders (no request, no query)
        page(defaults.server_error(RequestFactory().get("/x/")), 500, "Something went wrong")


def test_a_bad_request_is_a_400_page(objs: Objs):
    r = Client().get("/accounts/login/", HTTP_HOST="not-this-site.example")  # DisallowedHost
    page(r, 400, "Bad request", "Nothing was changed")


def test_a_page_not_allowed_is_a_403_page(objs: Objs):
    from django.contrib.auth.models import User

    c = Client()
    c.force_login(User.objects.get(username="agentadmin"))
    r = c.get("/admin/auth/user/")  # staff, without the users' rights
    page(r, 403, "Not allowed")


@pytest.mark.parametrize("cookie", [True, False], ids=["token-expired", "no-cookie"])
def test_a_csrf_failure_says_to_reload_the_page_and_try_again(objs: Objs, cookie: bool):
    c = _client(objs, "approver")
    c.handler.enforce_csrf_checks = True
    if cookie:
        c.get("/accounts/login/")
        c.cookies["csrftoken"] = "x" * 32  # another tab's login rotated it: the page's token no longer matches
    form = {"csrfmiddlewaretoken": "y" * 32}
    text = page(c.post(f"/tickets/{objs.call.pk}/approve/", form), 403, "reload the page and try again")
    assert "CSRF verification" not in text and "Referer" not in text
    if not cookie:
        assert "allow cookies" in text
    r = c.post(f"/tickets/{objs.call.pk}/approve/", form, HTTP_HX_REQUEST="true", HTTP_X_CSRFTOKEN="y" * 32)
    assert r.status_code == 403 and r["Content-Type"].startswith("text/plain")
    assert "reload the page and try again" in r.content.decode() and "<" not in r.content.decode()
    objs.call.refresh_from_db()
    assert objs.call.status == "pending"


def test_a_method_an_address_does_not_take_is_a_405_saying_what_it_takes(objs: Objs):
    """Django's require_POST / require_safe answered 405 with an empty body: opening a form's address (a
    reload after a POST, a link) or /accounts/logout/ showed a blank page."""
    c = _client(objs, "approver")
    text = page(c.get(f"/tickets/{objs.call.pk}/approve/"), 405, "Not a page to open", "use its button", "POST")
    assert "Nothing was changed" not in text
    page(c.delete("/sessions/"), 405, "does not take DELETE", "Nothing was changed")
    r = c.get("/accounts/logout/")
    page(r, 405, 'action="/accounts/logout/"', "Log out")
    assert r["Allow"] == "POST, OPTIONS"
    r = c.post(f"/sessions/{objs.session.pk}/", HTTP_HX_REQUEST="true")
    assert r.status_code == 405 and "does not take POST" in r.content.decode() and r["Allow"]
    r = c.post("/api/docs/")
    assert r.status_code == 405 and r.json()["detail"].startswith('Method "POST" not allowed here; use GET')
    assert c.get("/").status_code == 200  # still logged in: the GET logged nobody out


BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"  # Chromium's and Firefox's
# A refusal a page's view raises (adkweb.http.RefusalMiddleware): the admin's, of a `_to_field` it does not allow,
# quoting the URL. It reached a browser as a bare line of escaped text, no menu and no way back, where every
# other error page is in the site's look. Escaped in each shape (bee8793's XSS test: test_admin_lookups).
REFUSED = "/admin/auth/user/?_to_field=%3Cscript%3Ealert(1)%3C/script%3E"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


def _admin() -> Client:
    from django.contrib.auth.models import User

    c = Client()
    c.force_login(User.objects.get(username="admin"))
    return c


def test_a_pages_refusal_is_an_error_page_in_the_sites_look_to_a_browser(objs: Objs):
    text = page(_admin().get(REFUSED, HTTP_ACCEPT=BROWSER), 400, "Bad request", "cannot be used", ESCAPED)
    assert "<script>alert" not in text and "Conversations" in text  # escaped; the menu of one logged in


@pytest.mark.parametrize("headers", [{"HTTP_HX_REQUEST": "true", "HTTP_ACCEPT": BROWSER}, {"HTTP_ACCEPT": "*/*"}, {}])
def test_a_pages_refusal_is_its_text_to_htmx_and_to_clients_that_ask_for_no_html(objs: Objs, headers: dict):
    """htmx's notice shows a failed request's text (static/js/app.js); curl sends */*; the test client nothing."""
    r = _admin().get(REFUSED, **headers)
    body = r.content.decode()
    assert r.status_code == 400 and ESCAPED in body and "cannot be used" in body, body
    assert "<" not in body and 'class="topbar"' not in body


def test_a_pages_refusal_is_json_to_a_client_that_asks_for_json(objs: Objs):
    r = _admin().get(REFUSED, HTTP_ACCEPT="application/json")
    assert r.status_code == 400 and r["Content-Type"] == "application/json"
    assert "cannot be used" in r.json()["detail"] and "<script>alert(1)</script>" in r.json()["detail"]
