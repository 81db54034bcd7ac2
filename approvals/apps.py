from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals"

    def ready(self) -> None:
        from agents_app.session_service import register_event_hook

        from . import assignees, live_policy, services, ticket_sqlite
        from .services import tickets_event_wanted, tickets_record_event
        from .ticket_rider import ticket_rider

        register_event_hook(tickets_record_event, wants=tickets_event_wanted, rider=ticket_rider)
        services.sqlite_record = ticket_sqlite.record

        from adkweb.metrics import register_source

        from .metrics import ticket_metrics

        register_source("tickets", ticket_metrics)
        live_policy.connect()  # a policy's groups changed: their members' sockets asked again at once
        assignees.connect()  # a person's rights changed: the tickets they may no longer decide given back
