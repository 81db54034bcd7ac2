from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "notifications"
    verbose_name = "Notifications"

    def ready(self) -> None:
        from functools import partial

        from adkweb.notify import Outbox, register

        from .models import NotificationEvent
        from .services import enqueue, notify, owed_sql, owes

        # Other apps call adkweb.notify.notify; this app does the work. Its outbox: what notify
        # records, for a caller that writes the row in its own statement, and the task notify sends.
        outbox = Outbox(
            NotificationEvent._meta.db_table,
            partial(enqueue, "event_fan_out"),
            owes=owes,
            done="fanned_out_at",
            owed_sql=owed_sql,
        )
        register(notify, outbox=outbox)
