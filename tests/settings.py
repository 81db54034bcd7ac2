"""Test settings: the embedded defaults, with a file SQLite test DB (worker threads share it),
no worker started by importing asgi (tests start their own), and fast password hashing."""

import os

os.environ.setdefault("ADKWEB_EMBEDDED_WORKER", "0")
# Static files from the source folders, in the tests and the servers they start (no collectstatic);
# tests/integration/test_static_services.py runs collectstatic and the manifest storage.
os.environ.setdefault("ADKWEB_STATIC_MANIFEST", "0")
# A key for the test run (services-mode runs need one): the processes the tests start inherit it.
os.environ.setdefault("DJANGO_SECRET_KEY", "test-only-secret-key-not-for-any-deployment-0123456789")
# Artifacts' files: one place for the test process and the worker subprocesses it starts.
os.environ.setdefault("ADKWEB_MEDIA_ROOT", "/tmp/adkweb-test-media")

from adkweb.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Login throttling off: the suite logs in (and fails to) many times; tests/adkweb/test_throttling.py
# turns it on.
AXES_ENABLED = False
ADKWEB_EMBEDDED_WORKER = False
ADKWEB_REQUEUE_AFTER_SECONDS = 1
# The durability scenarios show the sweeper delivering what the broker refused; the in-process
# relay is shown by tests/integration/test_redis_outage.py (its web server runs with the default).
ADKWEB_ENQUEUE_RETRY_SECONDS = 0

if DATABASES["default"]["ENGINE"].endswith("sqlite3"):  # noqa: F405
    test_db = os.environ.get("ADKWEB_TEST_SQLITE", f"/tmp/adkweb-test-{os.getpid()}.sqlite3")
    DATABASES["default"]["TEST"] = {"NAME": test_db}  # noqa: F405
# The live servers the tests start in this process hand every turn to the real worker, as their tests
# expect (eager runs of /run, agents_app.eager, are shown by tests/integration/test_eager.py with daphne
# subprocesses on the production default).
ADKWEB_EAGER_RUN = False
