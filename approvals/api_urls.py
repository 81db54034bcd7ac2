"""The approvals API, mounted under /api/ (table: approvals.api_routes)."""

from adkweb.routes import urlpatterns as route_urls

from .api_routes import ROUTES

app_name = "approvals_api"

urlpatterns = route_urls(ROUTES)
