"""The Celery app: configured from Django settings (CELERY_*), tasks discovered in the apps, and the
workers' wake-up listener (agents_app.wake)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "adkweb.settings")

app = Celery("adkweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Every worker of the drain task's queue also listens for wake-ups (agents_app.wake, ADKWEB_WAKE_LIST).
app.steps["worker"].add("agents_app.wake_worker:WakeStep")
