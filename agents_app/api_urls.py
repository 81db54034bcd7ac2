"""ADK's REST routes (`adk api_server`), mounted under /api/adk/ (table: agents_app.api.routes)."""

from adkweb.routes import urlpatterns as route_urls

from .api.routes import ROUTES

app_name = "adk_api"

urlpatterns = route_urls(ROUTES)
