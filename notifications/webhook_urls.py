"""Where webhooks may point: not at this machine or its private network (loopback, private,
link-local, shared, reserved or multicast addresses: the metadata service at 169.254.169.254, Redis
on 127.0.0.1, ...), unless `ADKWEB_WEBHOOK_ALLOW_PRIVATE` allows it (a receiver on the same host or
network, and the tests' local receiver).

Checked when an endpoint is registered (a name that does not resolve yet is accepted) and again at
each delivery, where the POST goes to the address that was checked (the name's later answers, e.g.
a DNS record switched to 127.0.0.1 after registration, are not asked again), with the name kept for
the Host header and TLS (SNI and certificate check). A name with several addresses (all checked) is
tried address by address, as a client library would: the next one only when nothing could be sent
to the one before (the connection failed)."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from adkweb.http import unusable_port

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def allow_private() -> bool:
    return bool(getattr(settings, "ADKWEB_WEBHOOK_ALLOW_PRIVATE", False))


def is_public(ip: Address) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def _literal(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def resolve(host: str, port: int) -> list[Address]:
    """Every address the name resolves to (raises OSError when it does not resolve)."""
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in found))


def _parts(url: str) -> tuple[str, int]:
    split = urlsplit(url)
    host = split.hostname or ""
    return host, split.port or (443 if split.scheme == "https" else 80)


def _refusal(host: str, ip: Address) -> str:
    shown = host if str(ip) == host else f"{host} resolves to {ip}, which"
    return (
        f"url: {shown} is a loopback, private or link-local address: webhooks may not point into the "
        "server's own network (an administrator may allow it with ADKWEB_WEBHOOK_ALLOW_PRIVATE=1)."
    )


INVALID = "url: enter a valid http:// or https:// URL."
BAD_PORT = "url: enter a valid http:// or https:// URL (a port goes from 1 to 65535)."


def _port_refusal(url: str) -> str | None:
    return BAD_PORT if unusable_port(url) else None


def registration_refusal(url: str) -> str | None:
    """Why an endpoint may not be registered with this URL, or None. A name that does not resolve
    now is accepted: each delivery checks again."""
    bad_port = _port_refusal(url)
    if bad_port or allow_private():
        return bad_port
    host, port = _parts(url)
    if not host:
        return INVALID
    literal = _literal(host)
    try:
        addresses = [literal] if literal is not None else resolve(host, port)
    except (OSError, UnicodeError):
        return None
    for ip in addresses:
        if not is_public(ip):
            return _refusal(host, ip)
    return None


@dataclass(frozen=True)
class Target:
    """Where one delivery goes: the URL to POST to (its host the checked address), and the name
    kept for the Host header and TLS; `refusal` when it may not go anywhere. `fallbacks`: the same
    URL pinned to the name's other checked addresses, in the resolver's order."""

    url: str
    fallbacks: tuple[str, ...] = ()
    host_header: str = ""
    sni_hostname: str = ""
    refusal: str = ""


def delivery_target(url: str) -> Target:
    """Resolve and check the URL now; raises OSError when the name does not resolve (retried). A port
    no connection has (stored before registration refused it) is a refusal: never reachable, not retried."""
    bad_port = _port_refusal(url)
    if bad_port:
        return Target(url=url, refusal=bad_port)
    if allow_private():
        return Target(url=url)
    import httpx

    parsed = httpx.URL(url)
    host, port = _parts(url)
    literal = _literal(host)
    addresses = [literal] if literal is not None else resolve(host, port)
    for ip in addresses:
        if not is_public(ip):
            return Target(url=url, refusal=_refusal(host, ip))
    if literal is not None:
        return Target(url=url)
    first, *others = [str(parsed.copy_with(host=str(ip))) for ip in dict.fromkeys(addresses)]
    return Target(url=first, fallbacks=tuple(others), host_header=parsed.netloc.decode("ascii"), sni_hostname=host)
