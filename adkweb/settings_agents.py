"""Agent settings (tools, code agents, memory, leases, time limits, remote apps, turns and their
wake-ups, eager runs), imported by adkweb/settings.py."""

import os

from adkweb.envvars import env_bool
from adkweb.settings_mode import EMBEDDED, REDIS_URL

# Modules whose import registers tools in agents_app.tools.registry (comma-separated in the env).
ADKWEB_TOOL_MODULES = [
    m.strip() for m in os.environ.get("ADKWEB_TOOL_MODULES", "agents_app.demo.tools").split(",") if m.strip()
]
# Code-defined ADK apps: app name -> dotted path of an ADK agent or `App` (a bare dotted path is
# named after its App or agent). An App's name must be its app name.
ADKWEB_CODE_AGENTS: dict[str, str] = {
    name: path
    for name, _, path in (item.partition("=") for item in os.environ.get("ADKWEB_CODE_AGENTS", "").split(",") if item)
}
# An ADK agents folder laid out as `adk api_server AGENTS_DIR` expects (one folder per app).
ADKWEB_AGENTS_DIR = os.environ.get("ADKWEB_AGENTS_DIR", "")
# ADK memory service: "memory" (ADK's in-memory one, per process), "django" (in the database) or a
# dotted path to a BaseMemoryService class or factory.
ADKWEB_MEMORY_SERVICE = os.environ.get("ADKWEB_MEMORY_SERVICE", "memory")
ADKWEB_DEFAULT_MODEL = os.environ.get("ADKWEB_DEFAULT_MODEL", "demo-offline")
# Point ADK's Gemini client at a gateway (or a local protocol server in tests).
GEMINI_BASE_URL = os.environ.get("GOOGLE_GEMINI_BASE_URL", "")
# A run's lease on its session (one run per session at a time). A worker renews it every
# ADKWEB_LEASE_RENEW_SECONDS while a turn runs (and on every stored event); a crashed worker's
# session is free again within the lease, and the sweeper (beat every 15 s) resumes its turn:
# a killed worker's conversations continue within lease + sweep (< 60 s with these defaults).
ADKWEB_SESSION_LEASE_SECONDS = int(os.environ.get("ADKWEB_SESSION_LEASE_SECONDS", "30"))
ADKWEB_LEASE_RENEW_SECONDS = float(
    os.environ.get("ADKWEB_LEASE_RENEW_SECONDS", str(max(ADKWEB_SESSION_LEASE_SECONDS / 3, 0.2)))
)
# A turn running longer than the soft limit is stopped and recorded as failed; past the hard
# limit (a tool that ignores cancellation) its lease is no longer renewed, so the heartbeat
# cannot hold a session forever.
ADKWEB_TURN_SOFT_TIME_LIMIT = float(os.environ.get("ADKWEB_TURN_SOFT_TIME_LIMIT", "600"))
ADKWEB_TURN_HARD_TIME_LIMIT = float(os.environ.get("ADKWEB_TURN_HARD_TIME_LIMIT", "660"))
# Remote apps (agents served by other ADK servers): how long a worker waits to connect to the
# remote server, and for the next bytes of its answer (a remote step slower than this fails the
# turn with a clear error; the whole turn is bounded by ADKWEB_TURN_SOFT_TIME_LIMIT as well).
ADKWEB_REMOTE_CONNECT_TIMEOUT = float(os.environ.get("ADKWEB_REMOTE_CONNECT_TIMEOUT", "5"))
ADKWEB_REMOTE_READ_TIMEOUT = float(os.environ.get("ADKWEB_REMOTE_READ_TIMEOUT", "120"))
# Queued turns older than this are re-enqueued by the sweeper (broker was down, message lost).
ADKWEB_REQUEUE_AFTER_SECONDS = int(os.environ.get("ADKWEB_REQUEUE_AFTER_SECONDS", "10"))
ADKWEB_MAX_TURN_ATTEMPTS = 3
# How long /api/adk/run and /run_sse wait for the worker's run (the run goes on after that), and
# how often they re-read the database when the channel layer is silent.
ADKWEB_API_RUN_TIMEOUT = float(os.environ.get("ADKWEB_API_RUN_TIMEOUT", "120"))
ADKWEB_API_POLL_SECONDS = float(os.environ.get("ADKWEB_API_POLL_SECONDS", "1.0"))
# After a turn's commit, wake a worker through a Redis list its drainers block on (agents_app.wake)
# instead of Celery's message (services mode; the workers must run the threads pool). Off: Celery's task.
ADKWEB_WAKE_LIST = env_bool("ADKWEB_WAKE_LIST", bool(REDIS_URL))
# Eager runs (agents_app.eager): the web process that answers ADK's `/run` or `/run_sse` (and holds the
# request open until the turn ends) runs the session's drain itself, on one of ADKWEB_EAGER_SLOTS
# threads of its own, with the worker's code (lease, claim, heartbeat); with no slot free, or off,
# a worker is woken as before. Each slot keeps an event loop, a database thread and the agents it
# built, and a running drain holds one pooled connection: keep slots x 2 + a few under
# DATABASE_POOL_MAX_SIZE with the requests'. Default: on in embedded mode (the turn skips the
# in-process broker and its worker thread: p50 0.93-1.00x, p95 0.85-0.93x of before), off in services
# mode, where it measured slower (p50 1.04-1.27x: the whole turn then shares one process's GIL and
# CPU share with the web's own work, where a worker ran it in parallel; bench/README.md, phase 9 eager).
ADKWEB_EAGER_RUN = env_bool("ADKWEB_EAGER_RUN", EMBEDDED)
ADKWEB_EAGER_SLOTS = int(os.environ.get("ADKWEB_EAGER_SLOTS", "4"))
# An enqueue the broker refused is retried this often by the process that committed the turn
# (0: leave it to the sweeper alone).
ADKWEB_ENQUEUE_RETRY_SECONDS = float(os.environ.get("ADKWEB_ENQUEUE_RETRY_SECONDS", "1"))
# Turns one person may have queued or running at once (each may cost model calls): a message or
# /run beyond it is refused with 429 until one finishes. Answers to tickets are never capped. 0: no cap.
ADKWEB_MAX_QUEUED_TURNS_PER_USER = int(os.environ.get("ADKWEB_MAX_QUEUED_TURNS_PER_USER", "10"))
# How long an API Idempotency-Key is remembered (a retry with it gets the original answer).
ADKWEB_IDEMPOTENCY_KEY_HOURS = int(os.environ.get("ADKWEB_IDEMPOTENCY_KEY_HOURS", "24"))
