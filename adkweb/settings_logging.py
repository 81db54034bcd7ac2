"""LOGGING for adkweb/settings.py: every line with its time, level, logger name and the
turn/session/ticket ids it is about (adkweb.log_context)."""

from typing import Any


def logging_settings(*, level: str, quiet_celery: bool) -> dict[str, Any]:
    """Django's LOGGING dict. `quiet_celery`: Celery's own loggers at WARNING (the in-process worker of
    embedded mode would print a line per task every few seconds)."""
    config: dict[str, Any] = {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"ids": {"()": "adkweb.log_context.IdsFilter"}},
        "formatters": {
            "adkweb": {"format": "%(asctime)s %(levelname)s %(name)s%(ids)s: %(message)s"},
        },
        "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["ids"], "formatter": "adkweb"}},
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            "google_adk": {"level": "WARNING"},
            "httpx": {"level": "WARNING"},
            # daphne's runserver logs requests with its own handler: don't print each line twice.
            "django.channels.server": {"propagate": False},
        },
    }
    if quiet_celery:
        config["loggers"]["celery"] = {"level": "WARNING"}
    return config
