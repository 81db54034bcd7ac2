"""The OpenAPI document of both JSON APIs (`/api/openapi.json`) and a page that reads it (`/api/docs/`),
generated from the route tables (agents_app.api.routes, approvals.api_routes, notifications.api_routes)."""

from __future__ import annotations

import functools
from importlib import metadata
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from .api import api_view
from .routes import openapi


@functools.cache
def document() -> dict[str, Any]:
    """Built once per process: the tables are fixed at import time."""
    from agents_app.api.routes import ROUTES as ADK
    from approvals.api_routes import ROUTES as APPROVALS
    from notifications.api_routes import ROUTES as WEBHOOKS

    return openapi(
        title="adkweb API",
        version=f"adk-{metadata.version('google-adk')}",
        mounts=[
            ("/api/adk/", "ADK REST API (adk api_server)", ADK),
            ("/api/", "Approvals API", APPROVALS),
            ("/api/", "Webhooks API", WEBHOOKS),
        ],
    )


@api_view("GET", public=True)
def openapi_json(request: HttpRequest) -> JsonResponse:
    """The OpenAPI 3.1 document (public, as FastAPI's /openapi.json: it names no data)."""
    return JsonResponse(document())


def _ref_name(schema: dict[str, Any] | None) -> str:
    if not schema:
        return "null"
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    if schema.get("type") == "array":
        return f"list of {_ref_name(schema.get('items'))}"
    if "anyOf" in schema:
        return " or ".join(_ref_name(s) for s in schema["anyOf"])
    return str(schema.get("type", "object"))


def _entries(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for url, ops in doc["paths"].items():
        for method, op in ops.items():
            body = (op.get("requestBody") or {}).get("content", {}).get("application/json", {}).get("schema")
            ok_code, ok = next(iter(op["responses"].items()))
            media: list[dict[str, Any]] = list(ok.get("content", {}).values())
            ok_schema = media[0].get("schema") if media else None
            out.append(
                {
                    "tag": op["tags"][0],
                    "method": method.upper(),
                    "url": url,
                    "summary": op["summary"],
                    "params": [p for p in op.get("parameters", []) if p["in"] == "query"],
                    "body": _ref_name(body) if body else "",
                    "ok": f"{ok_code} {_ref_name(ok_schema)}",
                    "errors": [c for c in op["responses"] if c != ok_code],
                    "public": op.get("security") == [],
                }
            )
    return out


@login_required
@require_safe
def docs(request: HttpRequest) -> HttpResponse:
    """Every endpoint of both APIs, from the same document as /api/openapi.json."""
    return render(request, "adkweb/api_docs.html", {"entries": _entries(document())})
