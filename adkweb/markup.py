"""Markup written in Python, byte for byte as a template writes it, for rows of long lists.

Django's template engine costs a few microseconds per variable, tag and filter, and an inbox row has
~30 of them (issue 12, target 4). The inbox's rows (approvals.rows) and the conversation list's
(agents_app.rows) are built with these helpers instead: Django's own functions for what the template
did (`value` is `{{ value }}`: the current time zone, localisation, autoescaping; the filters are the
template filters themselves), so the markup is the same; tests compare each row with the template it
replaces (tests/adkweb/test_markup.py).

Every value from the database goes through `value()` (escaped); only literal markup is not.
"""

from __future__ import annotations

import functools
import html
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.forms.renderers import DjangoTemplates
from django.template.defaultfilters import date as date_filter
from django.template.defaultfilters import timesince_filter, timeuntil_filter
from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils.dateformat import DateFormat
from django.utils.formats import localize
from django.utils.html import conditional_escape
from django.utils.safestring import SafeData
from django.utils.timezone import get_current_timezone, template_localtime  # type: ignore[attr-defined]
from django.utils.translation import get_language


def value(obj: Any) -> str:
    """`{{ obj }}` with autoescaping on: in the current time zone, localised, escaped."""
    kind = type(obj)
    if kind is str:
        return html.escape(obj)  # django.utils.html.escape's characters, without its lazy-string wrapper
    if kind is int and not settings.USE_THOUSAND_SEPARATOR:
        return str(obj)  # what localize() makes of an int without grouping (numberformat's fast path)
    if kind is datetime and obj.tzinfo is not None and settings.USE_TZ:
        # The same instant in the same language and time zone always reads the same (no "now" in it).
        return _localized_instant(obj, get_language(), get_current_timezone())
    return _localized(obj)


def _localized(obj: Any) -> str:
    obj = localize(template_localtime(obj))
    return conditional_escape(obj if isinstance(obj, str) else str(obj))


@functools.lru_cache(maxsize=4096)
def _localized_instant(obj: datetime, language: str | None, zone: Any) -> str:
    return _localized(obj)  # called in that language and zone (they are the key, not arguments)


@receiver(setting_changed)
def _formats_changed(**kwargs: Any) -> None:
    _localized_instant.cache_clear()  # tests change USE_TZ, formats, languages


_value = value  # for the form renderer's writers, where `value` names a widget's value


def date(obj: Any, fmt: str) -> str:
    """`{{ obj|date:fmt }}`. The rows' formats of an aware datetime are written directly (the same
    characters as Django's DateFormat: tested against it); any other format or value goes through
    Django's filter."""
    if type(obj) is datetime and obj.tzinfo is not None and fmt in _FAST_FORMATS:
        return _FAST_FORMATS[fmt](template_localtime(obj))
    return value(date_filter(template_localtime(obj), fmt))


def _iso(d: datetime) -> str:
    return d.isoformat()  # "c": digits, "-", ":", "T", ".", "+" (nothing to escape)


def _ymd_hms_t(d: datetime) -> str:
    # "T": the zone's abbreviation, or "" for an ambiguous or imaginary local time (DateFormat decides).
    when = f"{d.year:04d}-{d.month:02d}-{d.day:02d} {d.hour:02d}:{d.minute:02d}:{d.second:02d}"
    return f"{when} {html.escape(DateFormat(d).T())}"


_FAST_FORMATS = {"c": _iso, "Y-m-d H:i:s T": _ymd_hms_t}


def timesince(obj: Any) -> str:
    """`{{ obj|timesince }}`."""
    return value(timesince_filter(template_localtime(obj)))


def timeuntil(obj: Any) -> str:
    """`{{ obj|timeuntil }}`."""
    return value(timeuntil_filter(template_localtime(obj)))


_SENTINEL_PK = 730_155_500_000_041  # a pk no row has, reversed once and replaced by each row's


@functools.lru_cache(maxsize=64)
def _url_around_pk(name: str, script_prefix: str, urlconf: Any) -> tuple[str, str] | None:
    url = reverse(name, args=[_SENTINEL_PK], urlconf=urlconf)  # under script_prefix: the current one
    head, found, tail = url.partition(str(_SENTINEL_PK))
    return (head, tail) if found and str(_SENTINEL_PK) not in tail else None


def url_for_pk(name: str, pk: Any) -> str:
    """`reverse(name, args=[pk])` for a URL whose one argument is an integer pk, reversed once per
    process (and script prefix) rather than once per row; anything else is reversed as usual."""
    if type(pk) is int and pk >= 0:
        around = _url_around_pk(name, get_script_prefix(), get_urlconf())
        if around is not None:
            return f"{around[0]}{pk}{around[1]}"
    return reverse(name, args=[pk])


def oob_attr(oob: Any) -> str:
    """`{% if oob %} hx-swap-oob="{{ oob }}"{% endif %}`."""
    return f' hx-swap-oob="{value(oob)}"' if oob else ""


def _attrs(attrs: dict[str, Any]) -> str:
    """django/forms/widgets/attrs.html."""
    out = []
    for name, val in attrs.items():
        if val is not False:
            out.append(f" {value(name)}" if val is True else f' {value(name)}="{_stringformat(val)}"')
    return "".join(out)


def _stringformat(val: Any) -> str:
    """`{{ val|stringformat:'s' }}`: the filter keeps a safe string safe."""
    text = "%s" % (str(val) if isinstance(val, tuple) else val)  # noqa: UP031 - the filter's own operation
    return text if isinstance(val, SafeData) else html.escape(text)


_WIDGETS = "django/forms/widgets/"
_INPUTS = frozenset(
    f"{_WIDGETS}{name}.html"
    for name in (
        "input", "text", "number", "hidden", "email", "password", "url", "search", "tel", "date", "datetime", "time",
        "color", "checkbox",
    )
)  # fmt: skip


def _input(widget: dict[str, Any]) -> str:
    """django/forms/widgets/input.html (and the templates that only include it)."""
    val = widget["value"]
    shown = f' value="{_stringformat(val)}"' if val != None else ""  # noqa: E711 - the template's comparison
    return f'<input type="{_value(widget["type"])}" name="{_value(widget["name"])}"{shown}{_attrs(widget["attrs"])}>'


def _textarea(widget: dict[str, Any]) -> str:
    """django/forms/widgets/textarea.html."""
    val = widget["value"]
    return (
        f'<textarea name="{_value(widget["name"])}"{_attrs(widget["attrs"])}>\n{_value(val) if val else ""}</textarea>'
    )


def _select(widget: dict[str, Any]) -> str | None:
    """django/forms/widgets/select.html with its options (select_option.html); None (use the templates)
    if an option has a template of its own."""
    out = [f'<select name="{_value(widget["name"])}"{_attrs(widget["attrs"])}>']
    for group_name, group_choices, _index in widget["optgroups"]:
        if group_name:
            out.append(f'\n  <optgroup label="{_value(group_name)}">')
        for option in group_choices:
            if option["template_name"] != f"{_WIDGETS}select_option.html":
                return None
            out.append(
                f'\n  <option value="{_stringformat(option["value"])}"{_attrs(option["attrs"])}>'
                f"{_value(option['label'])}</option>\n"
            )
        if group_name:
            out.append("\n  </optgroup>")
    out.append("\n</select>")
    return "".join(out)


class FormRenderer(DjangoTemplates):
    """Django's default form renderer, which writes the commonest widgets (inputs, textareas, selects)
    in Python instead of rendering two to a dozen templates per field: the same markup, from the
    same widget context (tested byte for byte against Django's templates for every widget it writes,
    hostile values, safe strings, optgroups). Every other template (labels, errors, forms, radio
    buttons, the admin's widgets) is rendered by the templates as before. (Django's own renderer
    always uses its built-in widget templates: apps cannot override them, so nothing is bypassed.)"""

    def render(self, template_name: str, context: dict[str, Any], request: Any = None) -> str:
        widget = context.get("widget")
        if isinstance(widget, dict):
            if template_name in _INPUTS:
                return _input(widget)
            if template_name == f"{_WIDGETS}textarea.html":
                return _textarea(widget)
            if template_name == f"{_WIDGETS}select.html":
                written = _select(widget)
                if written is not None:
                    return written
        return super().render(template_name, context, request)
