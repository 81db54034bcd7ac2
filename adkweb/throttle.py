"""What a throttled caller is told: a locked-out login (django-axes' AXES_LOCKOUT_CALLABLE) answers
429 with Retry-After, as a page for people and as `{"detail": ...}` under /api/."""

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
