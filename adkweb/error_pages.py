"""The pages of a request that fails before or outside a view's own answer: a CSRF failure (CSRF_FAILURE_VIEW).
The others are templates Django's handlers render (templates/404.html, 403.html, 400.html, 500.html, all
extending templates/errors/page.html); /api/'s 404 is JSON (adkweb.http.not_found), and the API answers its
own CSRF failures in JSON (adkweb.api)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import REASON_NO_CSRF_COOKIE
from django.template import loader

EXPIRED = (
    "This page's form has expired: its security token no longer matches your session (you logged in or out "
    "in another tab, or the page was open a long time): reload the page and try again."
)
NO_COOKIE = (
    "Your browser sent this form without the site's security cookie: allow cookies for this site, "
    "then reload the page and try again."
)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """403, saying what to do: a page in the site's look, or for htmx (a button or a form of a page that
    stays) the advice as text, which the page shows in its notice (static/js/app.js, htmx:responseError).
    Django's page spoke of "CSRF verification" and Referer headers. (Logged by Django's middleware.)"""
    advice = NO_COOKIE if reason == REASON_NO_CSRF_COOKIE else EXPIRED
    if request.headers.get("HX-Request"):
        return HttpResponse(advice, status=403, content_type="text/plain; charset=utf-8")
    # No request context: adkweb's CSRF check runs on the event loop (adkweb.middleware), where the menu's
    # context (the session, the user, the inbox count) would be a database call: the page shows no menu.
    body = loader.render_to_string("403_csrf.html", {"csrf_advice": advice})
    return HttpResponse(body, status=403)
