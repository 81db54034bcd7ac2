from django.urls import path

from . import consumers

websocket_urlpatterns = [
    path("ws/approvals/", consumers.InboxConsumer.as_asgi()),
    path("ws/tickets/<int:ticket_id>/", consumers.TicketConsumer.as_asgi()),
]
