from django.urls import path

from . import triage, views

app_name = "notifications"

urlpatterns = [
    path("a/<str:token>/", views.approval_link, name="approval-link"),
    path("settings/notifications/", views.preferences, name="preferences"),
    path("notifications/tickets/<int:ticket_id>/link/", views.ticket_link, name="ticket-link"),
    path("notifications/deliveries/<int:delivery_id>/resend/", views.delivery_resend, name="delivery-resend"),
    path("inbox/bulk/", triage.bulk, name="bulk"),
    path("inbox/views/", triage.view_save, name="view-save"),
    path("inbox/views/<int:view_id>/delete/", triage.view_delete, name="view-delete"),
]
