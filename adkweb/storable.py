"""Text (and numbers) that every database column can hold. PostgreSQL's text and jsonb refuse U+0000,
and no UTF-8 encoder takes an unpaired surrogate (a JSON "\\ud800" escape makes one): input carrying
either is refused with 400 before anything is stored, on SQLite as on PostgreSQL. So is a number
that is no finite float: JSON's 1e400 is read as infinity, which a JSON column would store as
"Infinity" (PostgreSQL's jsonb and SQLite's JSON_VALID refuse it). So is JSON nested past MAX_DEPTH
levels, which Python's parser reads (to about 1,000) but pydantic does not serialise (past 254): ADK's
session code and every event's JSON failed on it. (Model output is not input: the session service
stores a NUL it produces as U+FFFD.)"""

from __future__ import annotations

import math
import re
from typing import Any

from django import forms
from django.forms.fields import InvalidJSONInput
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.utils.deprecation import MiddlewareMixin

from .errors import Invalid
from .http import number
from .middleware import OnTheLoop

_SURROGATE = re.compile("[\ud800-\udfff]")


MAX_DEPTH = 100  # levels of JSON arrays and objects: pydantic serialises 254 at most, ADK's models wrap a few
TOO_DEEP = f"arrays or objects nested more than {MAX_DEPTH} levels deep"


def unstorable(value: Any) -> str | None:
    """What is wrong with the first unstorable string or number in `value` (strings and floats, and dict
    keys and values and list items at any depth), or its nesting past MAX_DEPTH levels, or None."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return "a NUL character (U+0000)"
            if _SURROGATE.search(item):
                return "an unpaired surrogate (U+D800 to U+DFFF)"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return "a number past the largest a float holds (about 1.8e308; 1e400 reads as infinity)"
        elif isinstance(item, dict | list | tuple):
            if depth > MAX_DEPTH:
                return TOO_DEEP
            items = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in items)
    return None


def check_storable(value: Any, where: str) -> None:
    """Raise Invalid (400) naming `where` if `value` holds text no database can store."""
    problem = unstorable(value)
    if problem:
        raise Invalid(f"{where} contains {problem}, which cannot be stored; remove it and send again.")


class StorableJSONField(forms.JSONField):
    """Django's form JSON field, refusing what no database column stores (`unstorable`): its parser
    takes NaN, Infinity and 1e400, and "\\u0000" and "\\ud800" escapes. A refused value is shown again
    as it was typed (its parsed form may hold a surrogate, which no page can be encoded with). Nor does it
    catch what its parser raises besides JSONDecodeError: int()'s ValueError past 4,300 digits, and a
    RecursionError past the nesting it can follow (each a 500, on saving and on showing the form again)."""

    def to_python(self, value: Any) -> Any:
        try:
            return super().to_python(value)
        except (ValueError, RecursionError) as exc:  # a JSONDecodeError is already Django's ValidationError
            invalid = self.error_messages["invalid"]
            raise forms.ValidationError(invalid, code="invalid", params={"value": value}) from exc

    def bound_data(self, data: Any, initial: Any) -> Any:
        try:
            value = super().bound_data(data, initial)
        except (ValueError, RecursionError):
            return InvalidJSONInput(data)
        if self.disabled or isinstance(value, InvalidJSONInput) or not unstorable(value):
            return value
        return InvalidJSONInput(data)

    def validate(self, value: Any) -> None:
        super().validate(value)
        problem = unstorable(value)
        if problem:
            raise forms.ValidationError(f"This contains {problem}, which cannot be stored.", code="unstorable")


class StorableIdsField(forms.ModelMultipleChoiceField):
    """Django's multiple choice of rows by id, refusing an id past a bigint with the field's error for a
    value that is no id: Django reads the ids with `pk__in`, which its lookups do not bound (they do for
    `pk=`), and SQLite refuses such a number (OverflowError: a 500)."""

    def clean(self, value: Any) -> Any:
        for pk in value if isinstance(value, list | tuple) else ():
            digits = str(pk).strip().removeprefix("-").removeprefix("+")
            if digits.isascii() and digits.isdigit() and number(digits) is None:
                raise forms.ValidationError(
                    self.error_messages["invalid_pk_value"], code="invalid_pk_value", params={"pk": pk}
                )
        return super().clean(value)


class StorableUrlMiddleware(OnTheLoop, MiddlewareMixin):
    """Refuse a URL (path or query string) carrying unstorable text before any view looks it up:
    400 with a JSON detail under /api/, a plain message for pages. (Sync and async capable, so
    async views and their streams stay async.)"""

    def process_request(self, request: HttpRequest) -> HttpResponse | None:
        problem = unstorable([request.path, *(x for k, v in request.GET.lists() for x in (k, *v))])
        if problem is None:
            return None
        detail = f"The URL contains {problem}, which no conversation, ticket or filter can hold."
        return url_refused(request.path, detail)


def url_refused(path: str, detail: str) -> HttpResponse:
    """A URL refused: 400 with a JSON detail under /api/, a plain message for pages."""
    if path.startswith("/api/"):
        return JsonResponse({"detail": detail}, status=400)
    return HttpResponse(detail, status=400, content_type="text/plain; charset=utf-8")


def socket_query(scope: dict) -> QueryDict | None:
    """A websocket's query string, or None when no page's URL could hold it (the socket is refused, as
    StorableUrlMiddleware answers such a URL with its 400): bytes that are not UTF-8 (read as they came,
    a UnicodeDecodeError failed the connect), or unstorable text (a NUL in a filter failed it on
    PostgreSQL)."""
    raw = scope.get("query_string", b"")
    try:
        query = QueryDict(raw.decode() if isinstance(raw, bytes) else raw)
    except UnicodeDecodeError:
        return None
    return None if unstorable([x for k, v in query.lists() for x in (k, *v)]) else query
