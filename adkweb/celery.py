"""The Celery app: configured from Django settings (CELERY_*), tasks discovered in the apps, and the
workers' wake-up drainers (agents_app.wake)."""

import os

from celery import Celery
from celery.signals import worker_process_init, worker_ready

from adkweb import gcpolicy

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "adkweb.settings")

app = Celery("adkweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Every worker of the drain task's queue also listens for wake-ups (agents_app.wake, ADKWEB_WAKE_LIST).
app.steps["worker"].add("agents_app.wake_worker:WakeStep")
# A worker's startup objects out of the garbage collector's full walks, and what its first drain leaves
# (adkweb.gcpolicy.freeze_worker): once its bootsteps have started (a threads pool's turns run in this
# process), and in each prefork child.
worker_ready.connect(gcpolicy.freeze_worker, weak=False, dispatch_uid="adkweb-gc-freeze-ready")
worker_process_init.connect(gcpolicy.freeze_worker, weak=False, dispatch_uid="adkweb-gc-freeze-child")
