"""The Celery app: configured from Django settings (CELERY_*), tasks discovered in the apps."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "adkweb.settings")

app = Celery("adkweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
