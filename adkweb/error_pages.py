"""The pages of a request that fails before or outside a view's own answer: a CSRF failure (CSRF_FAILURE_VIEW)
and a page's refusal (adkweb.http.RefusalMiddleware: `refused`). The others are templates Django's handlers
render (templates/404.html, 403.html, 400.html, 500.html, all extending templates/errors/page.html); /api/'s
404 is JSON (adkweb.http.not_found), and the API answers its own CSRF failures and refusals in JSON
(adkweb.api)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import REASON_NO_CSRF_COOKIE
from django.shortcuts import render
from django.template import loader

from .errors import Refused

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


# A refusal's page heading, by its status (templates/refused.html); others: "Not done".
HEADINGS = {
    400: "Bad request",
    401: "Log in first",
    403: "Not allowed",
    404: "Not found",
    405: "Not taken here",
    413: "Too large",
    429: "Too many at once",
}


def refused(request: HttpRequest, refusal: Refused) -> HttpResponse:
    """A page's refusal, with its status: for a browser (HTML first in its Accept) the site's error page saying
    it (templates/refused.html: the menu, a way back); `{"detail": ...}` for a client that asks for JSON; else
    (htmx, whose notice shows a failed request's text: static/js/app.js; curl; no Accept) the text. Escaped
    everywhere HTML may read it: the detail may quote the request (an admin lookup's name, a `_to_field`)."""
    shape = _wanted(request)
    if shape == "text/html":
        context = {"detail": refusal.detail, "heading": HEADINGS.get(refusal.status, "Not done")}
        return render(request, "refused.html", context, status=refusal.status)
    if shape == "application/json":
        return JsonResponse({"detail": refusal.detail}, status=refusal.status)
    return HttpResponse(as_text(refusal.detail), status=refusal.status)


def _wanted(request: HttpRequest) -> str:
    """The shape to answer in: text/html or application/json where the request's Accept names it (the one it
    prefers), else "text" (htmx's requests, whose notice shows text; an Accept of `*/*` names neither)."""
    if request.headers.get("HX-Request"):
        return "text"
    best = request.get_preferred_type(["text/html", "application/json"])
    matched = request.accepted_type(best) if best else None
    if matched is None or "*" in (matched.main_type, matched.sub_type):
        return "text"
    return best or "text"


def as_text(detail: str) -> str:
    """`detail` as HTML text: its `&`, `<` and `>` as entities (an element's content; no attribute). Quotes stay
    as they are (readable in a text/html body a browser or htmx shows)."""
    return detail.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
