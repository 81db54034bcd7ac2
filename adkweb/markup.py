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

from typing import Any

from django.template.defaultfilters import date as date_filter
from django.template.defaultfilters import timesince_filter, timeuntil_filter
from django.utils.formats import localize
from django.utils.html import conditional_escape, escape
from django.utils.timezone import template_localtime  # type: ignore[attr-defined]  # not in django-stubs


def value(obj: Any) -> str:
    """`{{ obj }}` with autoescaping on: in the current time zone, localised, escaped."""
    if type(obj) is str:
        return escape(obj)
    obj = localize(template_localtime(obj))
    return conditional_escape(obj if isinstance(obj, str) else str(obj))


def date(obj: Any, fmt: str) -> str:
    """`{{ obj|date:fmt }}`."""
    return value(date_filter(template_localtime(obj), fmt))


def timesince(obj: Any) -> str:
    """`{{ obj|timesince }}`."""
    return value(timesince_filter(template_localtime(obj)))


def timeuntil(obj: Any) -> str:
    """`{{ obj|timeuntil }}`."""
    return value(timeuntil_filter(template_localtime(obj)))


def oob_attr(oob: Any) -> str:
    """`{% if oob %} hx-swap-oob="{{ oob }}"{% endif %}`."""
    return f' hx-swap-oob="{value(oob)}"' if oob else ""
