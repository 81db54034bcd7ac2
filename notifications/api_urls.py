"""The webhooks API, mounted under /api/ (table: notifications.api_routes)."""

from adkweb.routes import urlpatterns as route_urls

from .api_routes import ROUTES

app_name = "notifications_api"

urlpatterns = route_urls(ROUTES)
