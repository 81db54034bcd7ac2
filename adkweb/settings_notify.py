"""Notification settings (email, webhooks, one-tap approval links), imported by adkweb/settings.py."""

import os

from adkweb.envvars import env_bool

EMAIL_HOST = os.environ.get("EMAIL_HOST", "")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "25"))
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = float(os.environ.get("EMAIL_TIMEOUT", "10"))  # a hung SMTP server costs one attempt, not a worker
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "adkweb <adkweb@localhost>")
# With no SMTP host (the embedded demo), emails are printed to the log: `make run` shows them.
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND") or (
    "django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST else "django.core.mail.backends.console.EmailBackend"
)
# Where people reach this server: the links in emails and webhook payloads start with it.
ADKWEB_BASE_URL = os.environ.get("ADKWEB_BASE_URL", "http://127.0.0.1:8000").rstrip("/")
# One-tap approval links expire after this many seconds (24 h), or at their ticket's due time if sooner.
ADKWEB_APPROVAL_LINK_SECONDS = int(os.environ.get("ADKWEB_APPROVAL_LINK_SECONDS", str(24 * 3600)))
# Seconds between tries of a failed email or webhook delivery: 6 tries over ~43 minutes.
ADKWEB_NOTIFY_RETRY_DELAYS = [
    float(s) for s in os.environ.get("ADKWEB_NOTIFY_RETRY_DELAYS", "10,30,120,600,1800").split(",") if s.strip()
]
ADKWEB_WEBHOOK_TIMEOUT = float(os.environ.get("ADKWEB_WEBHOOK_TIMEOUT", "10"))
# Webhooks may not point at loopback, private or link-local addresses (checked when registered and at
# each delivery) unless this allows it: a receiver on this host or its private network.
ADKWEB_WEBHOOK_ALLOW_PRIVATE = env_bool("ADKWEB_WEBHOOK_ALLOW_PRIVATE", False)
