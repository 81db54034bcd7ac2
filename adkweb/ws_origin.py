"""The websocket handshake's Origin check: as strict as Django's CSRF check of a POST's Origin.

A websocket handshake carries the person's cookies and no CSRF token, so a page of another site that
opens adkweb's sockets in their browser would read their live pages (cross-site websocket hijacking).
Channels' AllowedHostsOriginValidator let in any origin whose host name ALLOWED_HOSTS names, on any
port (another app on the same machine: localhost:9999) and any subdomain of a wildcard entry
(".example.com": a sibling's page), where Django refuses such a POST. Here, as CsrfViewMiddleware
decides for a POST, the origin must be

- one of CSRF_TRUSTED_ORIGINS (a wildcard entry, "https://*.example.com", takes its subdomains): what
  a proxy that does not pass the Host on needs, as POSTs do (the README's deployment sets it), or
- the host the socket is addressed to (its Host header: host name and port, the port the origin's
  scheme implies when either leaves it out), with that host allowed by ALLOWED_HOSTS.

Settings are read at each handshake (tests change them). A handshake without a Host header comes from
no browser (Channels' test communicator): the origin's host must then be allowed, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http import HttpResponse
from django.http.request import split_domain_port, validate_host
from django.middleware.csrf import CsrfViewMiddleware
from django.utils.http import is_same_domain

DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_allowed(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether a handshake with these headers comes from a page adkweb may be opened by."""
    found = {name: value.decode("latin1") for name, value in headers if name in (b"origin", b"host")}
    origin = found.get(b"origin")
    if not origin:
        return False
    csrf = CsrfViewMiddleware(HttpResponse)  # its reading of CSRF_TRUSTED_ORIGINS, per handshake (never called)
    try:
        parsed = urlsplit(origin)
    except ValueError:
        return False
    if origin in csrf.allowed_origins_exact or any(
        is_same_domain(parsed.netloc, trusted) for trusted in csrf.allowed_origin_subdomains.get(parsed.scheme, ())
    ):
        return True  # as CsrfViewMiddleware._origin_verified
    origin_host, origin_port = split_domain_port(parsed.netloc)
    default = DEFAULT_PORTS.get(parsed.scheme)
    if not origin_host or default is None or not validate_host(origin_host, _allowed_hosts()):
        return False
    if b"host" not in found:
        return True
    host, port = split_domain_port(found[b"host"])
    return host == origin_host and int(port or default) == int(origin_port or default)


def _allowed_hosts() -> list[str]:
    """ALLOWED_HOSTS, as HttpRequest.get_host reads it (with DEBUG and none set: the local names)."""
    if settings.DEBUG and not settings.ALLOWED_HOSTS:
        return [".localhost", "127.0.0.1", "[::1]"]
    return list(settings.ALLOWED_HOSTS)


def same_origin_only(app: Any) -> Callable:
    """ASGI middleware for websockets: a handshake from another origin is refused (HTTP 403)."""

    async def asgi(scope: dict, receive: Callable, send: Callable) -> Any:
        if origin_allowed(scope.get("headers", [])):
            return await app(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)

    return asgi
