"""What page views share: the htmx-aware request type, and refusals turned into responses."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.http import HttpRequest, HttpResponse, HttpResponseBase, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import Resolver404, resolve
from django.utils.deprecation import MiddlewareMixin
from django.views import defaults
from django_htmx.middleware import HtmxDetails

from .error_pages import refused
from .errors import Refused
from .middleware import OnTheLoop

NUMBER_DIGITS = 19  # a bigint's (a primary key's) most
NUMBER_MAX = 2**63 - 1  # a bigint's largest: 9,223,372,036,854,775,807 (19 digits, but not every 19 digits)


def number(raw: str) -> int | None:
    """`raw` as a whole number when it is ASCII digits only and fits a bigint (at most NUMBER_MAX), else
    None. (`str.isdigit()` also says yes to "²" or "①", which `int()` refuses, as it refuses more than
    4,300 digits: a 500 where a request's bad number deserves its 400; and a number past a bigint
    reaches a compiled query's parameters, where SQLite refuses it with OverflowError.)"""
    if len(raw) > NUMBER_DIGITS or not raw.isascii() or not raw.isdigit():
        return None
    value = int(raw)
    return value if value <= NUMBER_MAX else None


def unusable_port(url: str) -> bool:
    """Whether `url` names a port no connection has: one `urlsplit` cannot read (past 65535, not a
    number; also a URL it cannot split, such as "http://[::1") or port 0. Django's URL validator takes
    any 1 to 5 digits, and `.port`'s ValueError, read later, was a 500."""
    try:
        return urlsplit(url).port == 0
    except ValueError:
        return True


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


class RefusalMiddleware(OnTheLoop, MiddlewareMixin):
    """The one place a page's refusal becomes a response: its message, with its status. (A view
    that shows refusals in its own page, like the ticket page, catches `Refused` and uses
    `exc.status`.) Sync and async capable, so async views stay async.

    A browser gets the site's error page saying it, htmx and other clients its text, a client that asks for
    JSON `{"detail": ...}` (adkweb.error_pages.refused); escaped everywhere: the message may quote the request
    (the admin's refused lookups and `_to_field`, an id)."""

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, Refused):
            return refused(request, exception)
        return None

    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        """A 405 with no body (Django's require_POST / require_safe, a class view's) says what the address
        takes: a blank page told a person who opened a form's address (or /accounts/logout/) nothing."""
        if _blank_405(response):
            return method_refused(request, response.get("Allow", ""))
        return response

    def response_blocks(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        return _blank_405(response)  # a page of the site: its menu's context reads the database


def _blank_405(response: HttpResponseBase) -> bool:
    return response.status_code == 405 and not response.streaming and not response.content  # type: ignore[attr-defined]


def method_refused(request: HttpRequest, allow: str) -> HttpResponse:
    """405, saying which methods the address takes: JSON under /api/ (as adkweb.api's refusal), text to
    htmx, else a page (templates/405.html; on the logout address, its button)."""
    method = request.method or ""
    if request.path.startswith("/api/"):
        detail = f'Method "{method}" not allowed here; use {allow}.'
        response: HttpResponse = JsonResponse({"detail": detail}, status=405)
    elif request.headers.get("HX-Request"):
        response = HttpResponse(f"This address does not take {method}; it takes {allow}.", status=405)
    else:
        from django.urls import reverse

        logout = (
            request.path == reverse("logout") and bool(getattr(request, "user", None)) and request.user.is_authenticated
        )
        context = {"method": method, "allow": allow, "logout": logout}
        response = render(request, "405.html", context, status=405)
    response["Allow"] = allow
    return response


def _routed(path: str) -> bool:
    try:
        resolve(path)
    except Resolver404:
        return False
    return True


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 404 (handler404): under /api/, JSON with a `detail`, as every other refusal of the API (a path
    no route matches was Django's bare HTML page); pages keep Django's."""
    if not request.path.startswith("/api/"):
        return defaults.page_not_found(request, exception)
    slashless = request.path.rstrip("/")
    if request.path.startswith("/api/adk/") and slashless != request.path and _routed(slashless):
        # ADK's server (Starlette) sends a path with a trailing slash to the route without it: 307 keeps a
        # POST's method and body, so a client following redirects gets the route's answer.
        query = request.META.get("QUERY_STRING", "")
        redirect = HttpResponseRedirect(slashless + (f"?{query}" if query else ""))
        redirect.status_code = 307
        return redirect
    if isinstance(exception, Resolver404):
        detail = f"Not found: no API endpoint has the path {request.path!r} (the endpoints: /api/docs/)."
    else:
        detail = str(exception) or "Not found."
    return JsonResponse({"detail": detail}, status=404)
