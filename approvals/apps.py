from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals"

    def ready(self) -> None:
        from agents_app.session_service import register_event_hook

        from .services import pending_calls_record_event

        register_event_hook(pending_calls_record_event)
