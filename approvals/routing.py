from django.urls import path

from . import consumers, ticket_consumer

websocket_urlpatterns = [
    path("ws/approvals/", consumers.InboxConsumer.as_asgi()),
    path("ws/tickets/<int:ticket_id>/", ticket_consumer.TicketConsumer.as_asgi()),
]
