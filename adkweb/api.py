"""What every JSON API view shares: token or session auth, CSRF for cookies, JSON bodies, JSON errors.

Views are wrapped with `api_view(...)`: they (and the services they call) raise `adkweb.errors`
refusals and never see an unauthenticated request. Every refusal is `{"detail": "..."}` with the
refusal's status, as ADK's FastAPI server gives it. Tokens are checked by whichever auth backend
takes `api_token` (`agents_app.tokens.TokenBackend`), so this module knows no app.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.contrib.auth import authenticate
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from .errors import Forbidden, Invalid, MethodNotAllowed, Refused, TooLarge, Unauthenticated
from .storable import TOO_DEEP, check_storable

logger = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}


def iso(value: Any) -> str | None:
    """A datetime (or date) as the API's JSON writes it, ISO 8601; None for none."""
    return value.isoformat() if value else None


def refusal_response(exc: Refused) -> JsonResponse:
    """The one place a refusal becomes an API response."""
    response = JsonResponse({"detail": exc.detail}, status=exc.status)
    if exc.status == 401:
        response["WWW-Authenticate"] = 'Token realm="adkweb"'
    if isinstance(exc, MethodNotAllowed):
        response["Allow"] = ", ".join(exc.allow)
    return response


class CamelModel(BaseModel):
    """ADK's request models: camelCase on the wire, snake_case accepted too, unknown keys ignored."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class _CsrfCheck(CsrfViewMiddleware):
    def _reject(self, request: HttpRequest, reason: str) -> str:
        return reason


def token_from_header(request: HttpRequest) -> str | None:
    """The key from `Authorization: Token <key>` (or `Bearer <key>`), None when there is no such header."""
    header = request.headers.get("Authorization", "")
    scheme, _, key = header.partition(" ")
    if scheme.lower() not in {"token", "bearer"}:
        return None
    if not key.strip():
        raise Unauthenticated("The Authorization header has no token: send 'Authorization: Token <key>'.")
    return key


def authenticate_request(request: HttpRequest) -> None:
    """What `api_view` does before the view, for a view declared `api_view(..., auth_in_view=True)`:
    it calls this first, in its own first thread hop (one hop for auth and its own reads)."""
    _authenticate(request)
    request.api_authenticated = True  # type: ignore[attr-defined]


def _authenticate(request: HttpRequest) -> None:
    """Token auth (no cookies: no CSRF) or the browser session (CSRF enforced on unsafe methods)."""
    key = token_from_header(request)
    if key is not None:
        user = authenticate(request, api_token=key)
        if user is None:
            raise Unauthenticated("Invalid or revoked API token.")
        request.user = user
        request.api_token_auth = True  # type: ignore[attr-defined]
        return
    if not request.user.is_authenticated:
        raise Unauthenticated(
            "Authentication credentials were not provided: send 'Authorization: Token <key>' or log in."
        )
    if request.method not in SAFE_METHODS:
        check = _CsrfCheck(_no_view)
        check.process_request(request)
        reason = check.process_view(request, _no_view, (), {})
        if reason:
            raise Forbidden(
                f"CSRF failed: {reason}. Browser clients send the X-CSRFToken header; "
                "other clients use 'Authorization: Token <key>'.",
            )


def _no_view(request: HttpRequest) -> HttpResponse:
    return HttpResponse()


def _as_get(request: HttpRequest, methods: tuple[str, ...]) -> bool:
    """A HEAD where GET is taken: answered as the GET (its status and headers, no body: `_headless`),
    as ADK's server (Starlette) answers it. The view sees a GET, never its other branches'."""
    if request.method == "HEAD" and "GET" in methods:
        request.method = "GET"
        return True
    return False


def _method_allowed(request: HttpRequest, methods: tuple[str, ...]) -> None:
    if request.method not in methods:
        allow = methods + ("HEAD",) if "GET" in methods else methods
        raise MethodNotAllowed(f'Method "{request.method}" not allowed here; use {", ".join(allow)}.', allow)


def _headless(response: HttpResponse) -> HttpResponse:
    """The GET's answer to a HEAD: the same status and headers, with the GET body's length, no body."""
    if response.streaming:
        # The stream is not started (nothing of it is sent): its resources closed, but not through
        # `response.close()`, which also sends request_finished: mid-request, that closed the thread's
        # database connections under the request (in a transaction, its next query failed).
        closers = getattr(response, "_resource_closers", [])  # what close() runs before the signal
        for closer in closers:
            closer()
        closers.clear()
        bare = HttpResponse(status=response.status_code, headers=dict(response.items()))
        del bare["Content-Length"]
        return bare
    length = len(response.content)
    response.content = b""
    response["Content-Length"] = str(length)
    return response


def _unexpected(exc: Exception) -> JsonResponse:
    logger.exception("API view failed")
    return JsonResponse({"detail": f"Internal server error ({type(exc).__name__})."}, status=500)


def api_view(*methods: str, public: bool = False, auth_in_view: bool = False) -> Callable:
    """Wrap a sync or async view: method check, auth, CSRF for cookie sessions, refusals → JSON.
    `public=True` skips authentication (only for what tells nothing, e.g. /health).
    `auth_in_view=True` (async views): the view calls `authenticate_request` itself, first, in the
    thread hop of its own first reads (a view that answers without it gets a 500, never its answer)."""
    allowed = tuple(m.upper() for m in methods)
    deferred = auth_in_view and not public
    authenticate_request = (lambda request: None) if public or deferred else _authenticate

    def decorate(view: Callable) -> Callable:
        if iscoroutinefunction(view):

            @functools.wraps(view)
            async def async_wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
                if _as_get(request, allowed):
                    return _headless(await async_wrapper(request, *args, **kwargs))
                try:
                    _method_allowed(request, allowed)
                    if not deferred:
                        await sync_to_async(authenticate_request)(request)
                    response = await view(request, *args, **kwargs)
                    if deferred and not getattr(request, "api_authenticated", False):
                        raise RuntimeError(f"{view.__qualname__} answered without authenticate_request")
                    return response
                except Refused as exc:
                    return refusal_response(exc)
                except Exception as exc:
                    return _unexpected(exc)

            markcoroutinefunction(async_wrapper)
            wrapper: Callable = async_wrapper
        else:
            if deferred:
                raise TypeError("auth_in_view is for async views (a sync view is one thread hop already)")

            @functools.wraps(view)
            def sync_wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
                if _as_get(request, allowed):
                    return _headless(sync_wrapper(request, *args, **kwargs))
                try:
                    _method_allowed(request, allowed)
                    authenticate_request(request)
                    return view(request, *args, **kwargs)
                except Refused as exc:
                    return refusal_response(exc)
                except Exception as exc:
                    return _unexpected(exc)

            wrapper = sync_wrapper
        wrapper.csrf_exempt = True  # type: ignore[attr-defined]  # checked in _authenticate, cookies only
        wrapper.api_methods = allowed  # type: ignore[attr-defined]  # the route table (adkweb.routes) is checked against it
        wrapper.api_public = public  # type: ignore[attr-defined]
        return wrapper

    return decorate


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def json_body(request: HttpRequest, *, allow_empty: bool = False) -> Any:
    """The parsed JSON body (None for an empty one when allowed); 400 when it is not JSON
    (NaN and Infinity included: PostgreSQL's jsonb refuses them), 413 when it is too large."""
    try:
        raw = request.body
    except RequestDataTooBig as exc:
        raise TooLarge(f"The request body is too large: {exc}.") from exc
    if not raw.strip():
        if allow_empty:
            return None
        raise Invalid("The request body is empty; send a JSON object.")
    try:
        data = json.loads(raw, parse_constant=_no_constants)
    except (ValueError, UnicodeDecodeError) as exc:
        raise Invalid(f"Malformed JSON in the request body: {exc}.") from exc
    except RecursionError as exc:
        message = f"The request body contains {TOO_DEEP}, which cannot be stored; remove them and send again."
        raise Invalid(message) from exc
    check_storable(data, "The request body")
    return data


def validation_detail(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        where = ".".join(str(x) for x in err["loc"]) or "body"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts) + "."


def parse(model: type[M], data: Any) -> M:
    """Validate a JSON value into a request model; 400 with the field and the problem otherwise."""
    if not isinstance(data, dict):
        raise Invalid(f"The request body must be a JSON object, not {type(data).__name__}.")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise Invalid(validation_detail(exc)) from exc


MAX_INT = 2**31 - 1


def int_param(request: HttpRequest, name: str, default: int, *, low: int = 1, high: int | None = None) -> int:
    raw = request.GET.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise Invalid(f"Query parameter {name!r} must be an integer, not {raw!r}.") from exc
    high = MAX_INT if high is None else high  # past a 32-bit int a page's offset overflows the database's
    if value < low or value > high:
        raise Invalid(f"Query parameter {name!r} must be between {low} and {high}.")
    return value
