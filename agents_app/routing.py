from django.urls import path

from . import consumers, list_consumer

websocket_urlpatterns = [
    path("ws/sessions/", list_consumer.SessionListConsumer.as_asgi()),
    path("ws/sessions/<int:pk>/", consumers.SessionConsumer.as_asgi()),
]
