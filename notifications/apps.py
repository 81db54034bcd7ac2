from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "notifications"
    verbose_name = "Notifications"

    def ready(self) -> None:
        from adkweb.notify import Outbox, register

        from .models import NotificationEvent
        from .outbox import committed
        from .services import notify, owed_sql, owes

        # Other apps call adkweb.notify.notify; this app does the work. Its outbox: what notify
        # records, for a caller that writes the row in its own statement, and its work after commit.
        outbox = Outbox(
            NotificationEvent._meta.db_table,
            committed,
            owes=owes,
            done="fanned_out_at",
            owed_sql=owed_sql,
        )
        register(notify, outbox=outbox)
