"""The approvals API, mounted under /api/."""

from django.urls import path

from . import api

app_name = "approvals_api"

urlpatterns = [
    path("pending-calls", api.pending_calls, name="pending-calls"),
    path("pending-calls/<int:ticket_id>", api.pending_call, name="pending-call"),
    path("pending-calls/<int:ticket_id>/responses", api.responses, name="responses"),
    path("pending-calls/<int:ticket_id>/approve", api.approve, name="approve"),
    path("pending-calls/<int:ticket_id>/reject", api.reject, name="reject"),
    path("pending-calls/<int:ticket_id>/assign", api.assign, name="assign"),
]
