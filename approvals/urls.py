from django.urls import path

from . import views

app_name = "approvals"

urlpatterns = [
    path("", views.inbox, name="inbox"),
    path("tickets/<int:ticket_id>/", views.ticket_detail, name="ticket"),
    path("tickets/<int:ticket_id>/assign/", views.ticket_assign, name="ticket-assign"),
    path("tickets/<int:ticket_id>/<slug:action>/", views.ticket_act, name="ticket-act"),
]
