"""Login throttling's edges (django-axes): what a locked-out caller is told (AXES_LOCKOUT_CALLABLE: 429
with Retry-After, a page for people, `{"detail": ...}` under /api/), and what is not a password
(AXES_WHITELIST_CALLABLE: API tokens)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

STATUS = 429


def lockout_response(request: HttpRequest, original_response: Any = None, credentials: Any = None) -> HttpResponse:
    cooloff = settings.AXES_COOLOFF_TIME
    seconds = int(cooloff.total_seconds()) if cooloff else None
    minutes = max(1, round(seconds / 60)) if seconds else None
    wait = f"Try again in {minutes} minute{'s' if minutes != 1 else ''}." if minutes else "Ask an administrator."
    detail = f"Too many failed logins: this account is locked for your address. {wait}"
    response: HttpResponse
    if request.path.startswith("/api/"):
        response = JsonResponse({"detail": detail}, status=STATUS)
    else:
        ctx = {"detail": detail, "minutes": minutes}
        response = render(request, "registration/lockout.html", ctx, status=STATUS)
    if seconds:
        response["Retry-After"] = str(seconds)
    return response


def not_a_password(request: HttpRequest, credentials: Any = None) -> bool:
    """API tokens are not throttled: 160 random bits are not guessed a few tries at a time, and counting
    a misconfigured client's stale token would lock every token user behind the same address."""
    return isinstance(credentials, dict) and "api_token" in credentials
