"""Every URL pattern of the project (the admin's aside: test_admin_lookups, test_admin_pages), each of its
path parameters in turn given a hostile value (0, past a bigint, 30 digits; "..", NUL, bytes that are not
UTF-8, an unpaired surrogate, 3,000 characters, markup, a space), every method (a garbage JSON body, a form
of hostile values), as an admin, a requester and nobody: never a 5xx. Pages answer a refusal with a body
(a blank 405 or 404 tells a person nothing); the API answers its refusals in JSON with a detail."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from tests.adkweb.security.sweep import SESSION_ID, World, _content, world_create

INTS = ["0", "9223372036854775808", "9" * 30]
TEXTS = ["..", "%00", "%FF%FE", "%ED%A0%80", "x" * 3000, "%3Cb%3Ex", "%20", "a%2Fb"]
METHODS = ["GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"]
GARBAGE_JSON = '{"text": "\\u0000", "decision": 9e999, "pk": [1], '
HOSTILE_FORM = "text=%00&comment=%FF&decision=maybe&progress=1e999&payload=%7B&agent=..&page=-1&status=%3Cb%3E"
QUERY = "?page=99999999999999999999&after=-1&before=x&per_page=0&status=nope&sort=%3Cb%3E&limit=1e9&version=-1"


@pytest.fixture
def world(demo) -> World:
    return world_create(demo)


def patterns(resolver: Any = None, prefix: str = "") -> Iterator[tuple[str, URLPattern]]:
    for p in (resolver or get_resolver()).url_patterns:
        route = prefix + str(p.pattern)
        if isinstance(p, URLResolver):
            if not route.startswith("admin/"):
                yield from patterns(p, route)
        else:
            yield route, p


def fair_values(world: World) -> dict[str, str]:
    superuser = User.objects.filter(is_superuser=True).first()
    assert superuser is not None
    e = world.extras
    return {
        "app_name": "reimbursement_agent",
        "user_id": "requester",
        "session_id": SESSION_ID,
        "name": "chart.png",
        "version_id": "0",
        "ticket_id": str(world.call.pk),
        "policy_id": str(e["policy"]),
        "grant_id": str(e["grant"]),
        "endpoint_id": str(e["endpoint"]),
        "delivery_id": str(e["delivery"]),
        "view_id": str(e["view"]),
        "pk": str(world.session.pk),
        "turn_id": str(world.failed_turn.pk),
        "token": e["reject_token"],
        "action": "approve",
    }


def urls(world: World) -> Iterator[str]:
    fair = fair_values(world)
    for route, pattern in patterns():
        converters = pattern.pattern.converters  # type: ignore[attr-defined]
        names = list(converters)
        for name in [None, *names]:
            hostile = INTS if name and type(converters[name]).__name__ == "IntConverter" else TEXTS
            for value in hostile if name else [None]:
                given = {n: (value if n == name else fair[n]) for n in names}
                yield "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda m, given=given: given[m.group(1)], route)


def test_every_url_with_hostile_parameters_and_bodies_is_never_a_5xx(world):
    admin = User.objects.filter(is_superuser=True).first()
    clients = {"anonymous": Client(raise_request_exception=False)}
    for who, user in (("admin", admin), ("requester", world.users["requester"])):
        clients[who] = Client(raise_request_exception=False)
        clients[who].force_login(user)
    failures: list[str] = []
    seen = 0
    for url in urls(world):
        for who, c in clients.items():
            for method in METHODS:
                if method in ("POST", "PUT", "PATCH", "DELETE") and url.rstrip("/").endswith("logout"):
                    continue
                bodies = [("application/json", GARBAGE_JSON), ("application/x-www-form-urlencoded", HOSTILE_FORM)]
                for content_type, body in bodies if method in ("POST", "PUT", "PATCH") else [(None, "")]:
                    for query in ("", QUERY) if method == "GET" else ("",):
                        seen += 1
                        kwargs = {"content_type": content_type} if content_type else {}
                        r = c.generic(method, url + query, body, **kwargs)
                        failures += problems(r, f"{who} {method} {url[:90]}{query} {content_type or ''}")
    assert seen > 1000
    assert not failures, f"{len(failures)} of {seen}:\n" + "\n".join(sorted(set(failures)))


def problems(r: Any, where: str) -> list[str]:
    status = r.status_code
    content = _content(r).encode()
    if status >= 500:
        return [f"{where}: {status}"]
    if status < 400 or r.request["REQUEST_METHOD"] == "HEAD":
        return []
    if r.request["PATH_INFO"].startswith("/api/"):
        if not r.get("Content-Type", "").startswith("application/json") or b"detail" not in content:
            return [f"{where}: {status} not JSON with a detail: {content[:100]!r}"]
    elif not content.strip():
        return [f"{where}: {status} with an empty body"]
    return []
