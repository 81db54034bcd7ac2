"""Websocket routes of every app."""

from agents_app.routing import websocket_urlpatterns as agent_routes
from approvals.routing import websocket_urlpatterns as approval_routes

websocket_urlpatterns = [*agent_routes, *approval_routes]
