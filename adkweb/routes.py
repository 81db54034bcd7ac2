"""JSON API route tables: one entry per URL, with what each method takes and returns. Both the URL
patterns and the OpenAPI document (`/api/openapi.json`) are generated from them, so neither is
written by hand; a test checks every table against the views' own allowed methods."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.urls import URLPattern, path
from pydantic import BaseModel, TypeAdapter

PARAM = re.compile(r"<(?:(?P<conv>\w+):)?(?P<name>\w+)>")
ERRORS = {
    400: "Bad input",
    401: "No or bad credentials",
    403: "Not allowed",
    404: "Not found (or not yours to see)",
    409: "Conflict",
    413: "Body too large",
    422: "The body does not fit the request schema",
    429: "Too many requests (the caller's turns queued or running are at the cap)",
    502: "A server adkweb relies on (a remote app's ADK server) failed or is away",
}


class Refusal(BaseModel):
    """Any refusal but a schema failure: 400, 401, 403, 404, 409, 413, 429 (and 500/504 for a failed or slow run)."""

    detail: str


class ValidationItem(BaseModel):
    type: str
    loc: list[str | int]
    msg: str
    input: Any = None


class ValidationErrorBody(BaseModel):
    """422: the body does not fit the request schema (FastAPI's shape, as ADK's server sends it)."""

    detail: list[ValidationItem]


@dataclass(frozen=True)
class Op:
    """One method of a route."""

    method: str
    summary: str
    request: type[BaseModel] | None = None  # the JSON body
    response: Any = None  # the 200 body's type (a pydantic model, list[...], ...); None: null
    query: dict[str, str] = field(default_factory=dict)  # name -> description
    errors: tuple[int, ...] = (400, 401, 403, 404)
    stream: bool = False  # text/event-stream of `response` items
    media: str = ""  # the 200 body's media type when it is not JSON (e.g. text/csv); response: str
    status: int = 200  # the success status


@dataclass(frozen=True)
class Route:
    path: str  # Django path syntax, relative to where the table is mounted
    view: Callable
    name: str
    ops: tuple[Op, ...]


def urlpatterns(routes: Sequence[Route]) -> list[URLPattern]:
    return [path(r.path, r.view, name=r.name) for r in routes]


def _params(route_path: str) -> list[dict[str, Any]]:
    out = []
    for m in PARAM.finditer(route_path):
        kind = "integer" if m["conv"] == "int" else "string"
        out.append({"name": m["name"], "in": "path", "required": True, "schema": {"type": kind}})
    return out


def _error_schema(code: int) -> dict[str, Any]:
    if code == 422:
        return {"$ref": "#/components/schemas/ValidationErrorBody"}
    return {"$ref": "#/components/schemas/Refusal"}


def _operation(route: Route, op: Op, schemas: dict[Any, Any], tag: str) -> dict[str, Any]:
    out: dict[str, Any] = {"operationId": f"{route.name}_{op.method.lower()}", "summary": op.summary, "tags": [tag]}
    params = _params(route.path) + [
        {"name": k, "in": "query", "required": False, "schema": {"type": "string"}, "description": v}
        for k, v in op.query.items()
    ]
    if params:
        out["parameters"] = params
    if op.request is not None:
        body = schemas[(f"{route.name}.{op.method}.in", "validation")]
        out["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    ok = schemas.get((f"{route.name}.{op.method}.out", "serialization"), {"type": "null"})
    media = op.media or ("text/event-stream" if op.stream else "application/json")
    out["responses"] = {str(op.status): {"description": "OK", "content": {media: {"schema": ok}}}}
    for code in op.errors:
        content = {"application/json": {"schema": _error_schema(code)}}
        out["responses"][str(code)] = {"description": ERRORS.get(code, "Error"), "content": content}
    if getattr(route.view, "api_public", False):
        out["security"] = []
    return out


def openapi(
    *, title: str, version: str, mounts: Sequence[tuple[str, str, Sequence[Route]]], extra: Sequence[Any] = ()
) -> dict:
    """The OpenAPI 3.1 document for route tables mounted at prefixes: [(prefix, tag, routes)]."""
    types = [Refusal, ValidationErrorBody, *extra]
    inputs: list[tuple[Any, Any, TypeAdapter]] = [(t.__name__, "serialization", TypeAdapter(t)) for t in types]
    for _, _, routes in mounts:
        for route in routes:
            for op in route.ops:
                if op.request is not None:
                    inputs.append((f"{route.name}.{op.method}.in", "validation", TypeAdapter(op.request)))
                if op.response is not None:
                    inputs.append((f"{route.name}.{op.method}.out", "serialization", TypeAdapter(op.response)))
    schemas, defs = TypeAdapter.json_schemas(inputs, by_alias=True, ref_template="#/components/schemas/{model}")
    paths: dict[str, dict[str, Any]] = {}
    for prefix, tag, routes in mounts:
        for route in routes:
            url = prefix + PARAM.sub(lambda m: "{" + m["name"] + "}", route.path)
            paths[url] = {op.method.lower(): _operation(route, op, schemas, tag) for op in route.ops}
    components = dict(defs.get("$defs", {}))
    for (name, _), schema in schemas.items():
        if "." not in name:  # the extra models, by their own name
            components.setdefault(name, schema)
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
                "token": {"type": "apiKey", "in": "header", "name": "Authorization", "description": "Token <key>"},
                "session": {
                    "type": "apiKey",
                    "in": "cookie",
                    "name": "sessionid",
                    "description": "Browser login; send X-CSRFToken on writes",
                },
            },
        },
        "security": [{"token": []}, {"session": []}],
    }
