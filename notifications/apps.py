from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "notifications"
    verbose_name = "Notifications"

    def ready(self) -> None:
        from adkweb.notify import register

        from .services import notify

        register(notify)  # other apps call adkweb.notify.notify; this app does the work
