from django.urls import path

from . import views

app_name = "agents_app"

urlpatterns = [
    path("sessions/", views.session_list, name="session-list"),
    path("sessions/new/", views.session_new, name="session-new"),
    path("sessions/<int:pk>/", views.session_detail, name="session-detail"),
    path("sessions/<int:pk>/events/", views.session_events, name="session-events"),
    path("sessions/<int:pk>/messages/", views.message_post, name="message-post"),
    path("sessions/<int:pk>/turns/<int:turn_id>/retry/", views.turn_retry, name="turn-retry"),
    path("sessions/<int:pk>/artifacts/<path:name>", views.artifact_download, name="artifact"),
    path("agents/", views.agent_list, name="agent-list"),
]
