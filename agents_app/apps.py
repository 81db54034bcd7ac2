from django.apps import AppConfig


class AgentsAppConfig(AppConfig):
    name = "agents_app"
    verbose_name = "Agents"

    def ready(self) -> None:
        from importlib import import_module

        from django.conf import settings
        from django.core.signals import request_finished
        from django.db.backends.signals import connection_created

        for module in settings.ADKWEB_TOOL_MODULES:
            import_module(module)
        from adkweb.metrics import register_source

        from . import (
            admin_tokens,  # noqa: F401  (API tokens in the admin)
            checks,  # noqa: F401  (check --deploy: the demo's published logins)
            eager,
            events,
            fanout,
            pooler,
            runner,
            session_status,
            wake,
            worker_loop,
        )
        from .metrics import turn_metrics

        session_status.connect()  # sessions' stored status follows their turns and tickets
        events.register_fanout(fanout)  # the conversation pages' fragments, rendered once per audience
        register_source("turns", turn_metrics)  # /metrics (adkweb.metrics)
        eager.register_drain(runner.session_turns_run)  # what an eager /run runs: the worker's drain
        worker_loop.connect_shutdown()  # a Celery worker's shutdown closes its turns' loops and threads
        request_finished.connect(wake.left_read, dispatch_uid="adkweb_wake_left_read")  # a rolled-back push's reply
        pooler.configure()  # ADKWEB_DB_POOLER=transaction: statements as text
        connection_created.connect(pooler.django_connected, dispatch_uid="adkweb_pooler")  # or a pooler recognised
