"""ADK's REST request and response models (`adk api_server`'s, field for field), and the body
parser that refuses a bad body the way ADK's FastAPI server does (422, a `detail` list)."""

from __future__ import annotations

import enum
import json
import typing
from collections.abc import Iterator
from functools import cache
from typing import Any, Literal, TypeVar

from django.http import HttpRequest
from google.adk.utils.agent_info import AgentInfo
from google.genai import types
from pydantic import BaseModel, Field, ValidationError

from adkweb.api import CamelModel, json_body
from adkweb.errors import Invalid, Unprocessable

M = TypeVar("M", bound=BaseModel)


class RunAgentRequest(CamelModel):
    """The body of /run and /run_sse; fields adkweb does not use are accepted and ignored."""

    app_name: str
    user_id: str
    session_id: str
    new_message: types.Content | None = Field(
        default=None, description="A user message, or function responses to pending calls; none: run on the history."
    )
    streaming: bool = False  # lax, as ADK's: "true"/"no"/1 are taken
    state_delta: dict[str, Any] | None = None
    invocation_id: str | None = None
    function_call_event_id: str | None = None
    custom_metadata: dict[str, Any] | None = None


class CreateSessionRequest(CamelModel):
    session_id: str | None = Field(default=None, description="Generated when absent.")
    state: dict[str, Any] | None = None
    events: list[Any] | None = Field(default=None, description="Not supported by adkweb (400).")
    options: dict[str, Any] | None = Field(
        default=None, description="For the session service, which takes none (400 unless empty), as in ADK."
    )


class UpdateSessionRequest(CamelModel):
    """PATCH on a session: a state change recorded as an event, without running the agent."""

    state_delta: dict[str, Any]


class UpdateMemoryRequest(CamelModel):
    """PATCH on a user's memory: add one of their sessions to the app's memory service."""

    session_id: str


class SaveArtifactRequest(CamelModel):
    filename: str
    artifact: types.Part
    custom_metadata: dict[str, Any] | None = None


class AppInfo(CamelModel):
    name: str
    root_agent_name: str
    description: str
    language: Literal["yaml", "python"]
    is_computer_use: bool = False
    agents: dict[str, AgentInfo] | None = None


class ListAppsResponse(CamelModel):
    apps: list[AppInfo]


class Health(BaseModel):
    status: str


class Version(BaseModel):
    version: str
    language: str
    language_version: str


def _item(err: Any) -> dict:
    return {"type": err["type"], "loc": ["body", *err["loc"]], "msg": err["msg"], "input": err.get("input")}


def body_json(request: HttpRequest, *, allow_empty: bool = False) -> Any:
    """The parsed JSON body; malformed JSON and a missing body are a 422 with FastAPI's item (where the
    parser stopped and why; `missing`), anything else adkweb refuses in JSON (NaN, too deep, not UTF-8) a
    422 saying so; a body over the limit stays a 413."""
    try:
        return json_body(request, allow_empty=allow_empty)
    except Invalid as exc:
        cause = exc.__cause__
        if isinstance(cause, json.JSONDecodeError):
            item = {"type": "json_invalid", "loc": ["body", cause.pos], "msg": "JSON decode error", "input": {}}
            raise Unprocessable([{**item, "ctx": {"error": cause.msg}}]) from exc
        if not request.body.strip():
            raise Unprocessable([{"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}]) from exc
        raise Unprocessable([{"type": "json_invalid", "loc": ["body"], "msg": exc.detail, "input": {}}]) from exc


def not_an_object(data: Any, *, model: bool = True) -> Unprocessable:
    """FastAPI's 422 for a body that is not a JSON object: for a request model, or (`model=False`) a dict."""
    if not model:
        return Unprocessable(
            [{"type": "dict_type", "loc": ["body"], "msg": "Input should be a valid dictionary", "input": data}]
        )
    msg = "Input should be a valid dictionary or object to extract fields from"
    return Unprocessable([{"type": "model_attributes_type", "loc": ["body"], "msg": msg, "input": data}])


def parse_body(model: type[M], request: HttpRequest) -> M:
    """The request body as `model`; 422 with FastAPI's `detail` list when it does not fit."""
    return validate(model, body_json(request))


def parse_optional_body(model: type[M], request: HttpRequest) -> M | None:
    """As parse_body, but no body (or JSON null) is None."""
    data = body_json(request, allow_empty=True)
    return None if data is None else validate(model, data)


def validate(model: type[M], data: Any) -> M:
    if not isinstance(data, dict):
        raise not_an_object(data)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = [_item(e) for e in exc.errors(include_url=False)]
        raise Unprocessable(json.loads(json.dumps(errors, default=str))) from exc
    except AttributeError as exc:  # google.genai's enums read a name with `value.upper()`, past pydantic's checks
        loc = _not_a_name(data, _enum_fields(model), ["body"])
        if loc is None:
            raise
        msg = "Input should be the name of one of the enumeration's members, as a string"
        raise Unprocessable([{"type": "enum", "loc": loc, "msg": msg, "input": None}]) from exc


@cache
def _enum_fields(model: type[BaseModel]) -> frozenset[str]:
    """The names and aliases of the fields, in `model` and the models within it, that take an enum."""
    found: set[str] = set()
    seen: set[type] = set()
    todo: list[type[BaseModel]] = [model]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for name, field in current.model_fields.items():
            for kind in _types(field.annotation):
                if issubclass(kind, BaseModel):
                    todo.append(kind)
                elif issubclass(kind, enum.Enum):
                    found |= {name, field.alias or name}
    return frozenset(found)


def _types(annotation: Any) -> Iterator[type]:
    if isinstance(annotation, type):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _types(arg)


def _not_a_name(data: Any, names: frozenset[str], loc: list[Any]) -> list[Any] | None:
    """Where in `data` (JSON, at most adkweb.storable.MAX_DEPTH deep) a field of `names` holds a value that is
    neither a string nor null (None: nowhere)."""
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        if key in names and value is not None and not isinstance(value, str):
            return [*loc, key]
        found = _not_a_name(value, names, [*loc, key])
        if found is not None:
            return found
    return None
