"""ASGI entry point: HTTP through Django, websockets through Channels (authenticated sessions)."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "adkweb.settings")
django.setup(set_prefix=False)  # as django.core.asgi.get_asgi_application does

from adkweb.daphne_limits import daphne_limits_answered  # noqa: E402
from adkweb.handler import ASGIHandler, daphne_bodies_unparsed  # noqa: E402  (Django's, its request threads kept)

django_asgi_app = ASGIHandler()
daphne_bodies_unparsed()  # Twisted parses no POST body into args nobody reads (adkweb.handler)
daphne_limits_answered()  # a URL past Twisted's 16 KB: a 414 saying so, not a dropped connection

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import WebsocketDenier  # noqa: E402
from django.conf import settings  # noqa: E402
from django.urls import re_path  # noqa: E402

from adkweb import gcpolicy  # noqa: E402
from adkweb.metrics import websocket_counter  # noqa: E402
from adkweb.routing import websocket_urlpatterns  # noqa: E402
from adkweb.ws_origin import same_origin_only  # noqa: E402
from adkweb.wsframes import frame_writer  # noqa: E402

# Every other path's handshake is refused (403, as an unknown page is a 404), where Channels' router raised.
_routes = [*websocket_urlpatterns, re_path(r"", WebsocketDenier.as_asgi())]
router = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        # A handshake from another origin (another site, port or subdomain) is refused (adkweb.ws_origin).
        "websocket": websocket_counter(same_origin_only(AuthMiddlewareStack(URLRouter(_routes)))),
    }
)
# Outermost: it reads daphne's own `send` to write prebuilt frames (adkweb.wsframes). Inside it, the
# garbage collector's policy hears of each websocket's start and end (adkweb.gcpolicy).
application = frame_writer(gcpolicy.websockets_settle(router))

if settings.ADKWEB_EMBEDDED_WORKER:
    from agents_app.embedded import start_embedded_worker

    start_embedded_worker()

# What the process made to start (Django, the apps, ADK and its models: ~200k objects) lives as long as
# it does: out of the cyclic collector's way (gc.freeze), and so are the objects of websockets that have
# settled (open, none opening or closing for a moment). Each full collection walked all of it: with
# 1,000 websockets open one took 200-390 ms of the event loop, the round of bench/fanout.py that missed
# target 5 (bench/README.md, phases 8 and 9; adkweb.gcpolicy says what it costs and how it is bounded).
gcpolicy.install(settle=settings.ADKWEB_GC_SETTLE_SECONDS, thaw_closes=settings.ADKWEB_GC_THAW_CLOSES)
