from django.urls import path

from . import audit_views, policy_views, views

app_name = "approvals"

urlpatterns = [
    path("", views.inbox, name="inbox"),
    path("tickets/<int:ticket_id>/", views.ticket_detail, name="ticket"),
    path("tickets/<int:ticket_id>/assign/", views.ticket_assign, name="ticket-assign"),
    path("tickets/<int:ticket_id>/<slug:action>/", views.ticket_act, name="ticket-act"),
    path("policies/", policy_views.policy_list, name="policies"),
    path("policies/new/", policy_views.policy_new, name="policy-new"),
    path("policies/<int:policy_id>/", policy_views.policy_edit, name="policy"),
    path("policies/<int:policy_id>/delete/", policy_views.policy_delete, name="policy-delete"),
    path("policies/<int:policy_id>/dry-run/", policy_views.policy_dry_run, name="policy-dry-run"),
    path("grants/", policy_views.grant_list, name="grants"),
    path("grants/<int:grant_id>/revoke/", policy_views.grant_revoke, name="grant-revoke"),
    path("audit/", audit_views.audit_list, name="audit"),
    path("audit/export.csv", audit_views.audit_export, {"fmt": "csv"}, name="audit-csv"),
    path("audit/export.jsonl", audit_views.audit_export, {"fmt": "jsonl"}, name="audit-jsonl"),
]
