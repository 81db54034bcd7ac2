from django.urls import path

from . import consumers

websocket_urlpatterns = [
    path("ws/sessions/", consumers.SessionListConsumer.as_asgi()),
    path("ws/sessions/<int:pk>/", consumers.SessionConsumer.as_asgi()),
]
