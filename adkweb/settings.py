"""adkweb settings: env-driven, with embedded defaults that work with no environment at all.

Embedded mode (no DATABASE_URL / REDIS_URL): SQLite, in-memory channel layer, Celery on the
memory broker with a worker thread inside the serving process, the offline demo model.
Services mode: DATABASE_URL (PostgreSQL) and REDIS_URL (broker + channel layer). Outside the
embedded demo, DEBUG is off unless DJANGO_DEBUG says otherwise and DJANGO_SECRET_KEY is required.
"""

import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from kombu import Queue

from adkweb import settings_mode
from adkweb.envvars import env_bool, env_list
from adkweb.settings_logging import logging_settings
from adkweb.settings_mode import DATABASE_URL, DEPLOYED, EMBEDDED, REDIS_URL, redis_url_refusal  # embedded or deployed

BASE_DIR = Path(__file__).resolve().parent.parent


# --- Core -------------------------------------------------------------------------------
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if DEPLOYED:
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY is not set. Outside the embedded demo (DATABASE_URL or REDIS_URL is set) adkweb "
            "needs a secret key of its own: set DJANGO_SECRET_KEY to a long random value, e.g. the output of "
            "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`, and keep it secret."
        )
    SECRET_KEY = "dev-only-insecure-key-for-the-embedded-demo"  # signs nothing that leaves this machine
elif DEPLOYED and (weakness := settings_mode.secret_key_weakness(SECRET_KEY)):
    raise ImproperlyConfigured(
        f"DJANGO_SECRET_KEY is too weak: {weakness}. It signs logins and one-tap approval links: set it to a long "
        "random value, e.g. the output of `python -c 'import secrets; print(secrets.token_urlsafe(50))'`, and "
        "keep it secret."
    )
DEBUG = env_bool("DJANGO_DEBUG", not DEPLOYED)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", "")
CSRF_FAILURE_VIEW = "adkweb.error_pages.csrf_failure"  # a page saying what to do; text for htmx

# --- HTTPS (behind a TLS-terminating proxy; the README's deployment guide sets these) ------
# Trust the proxy's X-Forwarded-Proto: https (only if the proxy always sets it; see the guide).
if env_bool("DJANGO_SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_SECURE_HSTS_SECONDS", "0"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", False)
# Cookies sent over HTTPS only (session, CSRF): on wherever adkweb is reached over HTTPS.
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", False)

INSTALLED_APPS = [
    "daphne",
    "adkweb.admin_app.AdminConfig",  # django.contrib.admin, its site adkweb.admin_lists.CheckedAdminSite
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "servestatic",  # its system checks (the serving is its middleware's)
    "django_htmx",
    "template_partials",
    "channels",
    "axes",  # login throttling (below)
    "adkweb",  # shared plumbing: roles (setup_roles), errors, API and page helpers
    "agents_app",
    "approvals",
    "notifications",
]

# Served by daphne, Django's own middleware below run their hooks on the event loop where they do no
# I/O (adkweb.handler loads adkweb.middleware's versions in their place; the names stay Django's, which
# `check --deploy` looks for).
MIDDLEWARE = [
    "adkweb.health.ProbeMiddleware",  # /healthz and /readyz, before host checks and HTTPS redirects
    "django.middleware.security.SecurityMiddleware",
    "servestatic.middleware.ServeStaticMiddleware",  # /static/ before anything else reads the request
    "adkweb.storable.StorableUrlMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "adkweb.http.RefusalMiddleware",
    "axes.middleware.AxesMiddleware",  # last: turns a locked-out login into the 429 page
]

ROOT_URLCONF = "adkweb.urls"
ASGI_APPLICATION = "adkweb.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "approvals.context_processors.nav",
                "notifications.context_processors.nav",
            ],
        },
    },
]

# Django's form renderer, with the commonest widgets written in Python (adkweb.markup.FormRenderer).
FORM_RENDERER = "adkweb.markup.FormRenderer"

# --- Database ---------------------------------------------------------------------------
DATABASES = {
    "default": dj_database_url.parse(
        DATABASE_URL or f"sqlite:///{BASE_DIR / 'db.sqlite3'}",
        conn_max_age=0,
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Several threads (web + in-process worker) write to one file: wait rather than fail. In WAL
    # mode readers do not wait for a writer, and a commit syncs the log once (synchronous stays
    # FULL: a committed decision survives a power cut) instead of writing and deleting a journal.
    DATABASES["default"].setdefault("OPTIONS", {})
    DATABASES["default"]["OPTIONS"].update(
        {"timeout": 20, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL"}
    )
    # Each thread keeps its connection (opening one registers Django's SQL functions: 8% of the
    # embedded server's CPU when every request and task opened its own). PostgreSQL has its pool.
    DATABASES["default"]["CONN_MAX_AGE"] = None
    # Django's backend, its writers in this process queued on a lock rather than on SQLite's busy
    # handler, which sleeps and retries (adkweb.sqlite3.base).
    DATABASES["default"]["ENGINE"] = "adkweb.sqlite3"
    # The inbox's covering index (approvals ticket_newest, INCLUDE for PostgreSQL's index-only scans) is a
    # plain index here: Django's check said so at every `make run` (models.W040), as a warning to act on.
    SILENCED_SYSTEM_CHECKS = ["models.W040"]
if DATABASES["default"]["ENGINE"].endswith("postgresql"):  # Django's, with a step as a COMMIT leaves
    DATABASES["default"]["ENGINE"] = "adkweb.postgresql"  # (adkweb.postgresql.base: a turn's wake-up)
if DATABASES["default"]["ENGINE"].endswith("postgresql") and env_bool("DATABASE_POOL", True):
    # Django's psycopg pool, one per process: requests and worker threads wait up to the timeout
    # for a connection instead of failing with "too many clients". Size it so that
    # web processes x max + worker processes x max + beat stays under PostgreSQL's
    # max_connections (100 by default, 3 reserved): e.g. 2 web + 2 workers at 20 = 80.
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": int(os.environ.get("DATABASE_POOL_MIN_SIZE", "2")),
        "max_size": int(os.environ.get("DATABASE_POOL_MAX_SIZE", "20")),
        "timeout": float(os.environ.get("DATABASE_POOL_TIMEOUT", "30")),
    }
# Behind a connection pooler (agents_app.pooler): `transaction` (PgBouncer's transaction mode: nothing
# outlives a transaction), `session`, `none`, or unset (auto: a pooler is recognised when a connection opens).
ADKWEB_DB_POOLER = os.environ.get("ADKWEB_DB_POOLER", "").strip().lower()
if ADKWEB_DB_POOLER not in ("", "auto", "none", "session", "transaction"):
    raise ImproperlyConfigured("ADKWEB_DB_POOLER must be transaction, session, none or auto")
if ADKWEB_DB_POOLER == "transaction":
    # Django's .iterator() declares a cursor WITH HOLD in one transaction and fetches in the next.
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
if (
    DATABASES["default"]["ENGINE"].endswith("postgresql")
    and not env_bool("DATABASE_JIT", False)
    and ADKWEB_DB_POOLER not in ("session", "transaction")  # PgBouncer refuses the startup `options`
):
    # PostgreSQL's JIT compiles "expensive" plans: on this app's short, index-bound queries it only
    # adds 40-600 ms of compiling (bench/README.md, pages.py). Off for our connections.
    DATABASES["default"].setdefault("OPTIONS", {})["options"] = "-c jit=off"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Auth -------------------------------------------------------------------------------
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: refuses a locked-out login before any password check
    "django.contrib.auth.backends.ModelBackend",
    "agents_app.tokens.TokenBackend",  # API keys: `Authorization: Token <key>` (adkweb.api)
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
# Login throttling (django-axes): after ADKWEB_LOGIN_FAILURE_LIMIT failed logins for one username
# from one address (the login page or the admin's) that pair is refused with HTTP 429 for
# ADKWEB_LOGIN_COOLOFF_MINUTES; a success resets the count. API tokens are not passwords and are not
# counted (adkweb.throttle.not_a_password). Behind a proxy run daphne with --proxy-headers so the
# address is the client's (see the deployment guide).
AXES_ENABLED = env_bool("ADKWEB_LOGIN_THROTTLE", True)
AXES_FAILURE_LIMIT = int(os.environ.get("ADKWEB_LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(minutes=float(os.environ.get("ADKWEB_LOGIN_COOLOFF_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "adkweb.throttle.lockout_response"
AXES_WHITELIST_CALLABLE = "adkweb.throttle.not_a_password"
AXES_VERBOSE = False
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

# --- I18n / static ----------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("ADKWEB_STATIC_ROOT") or BASE_DIR / "staticfiles")
# Static files are served by ServeStatic's middleware (async: right under daphne), the admin's included.
# Outside the embedded demo they come from `manage.py collectstatic`: compressed copies with hashed
# names (cached for a year, immutable) listed in a manifest, which {% static %} reads. The embedded
# demo and the tests serve the source folders as they are (no collectstatic needed).
ADKWEB_STATIC_MANIFEST = env_bool("ADKWEB_STATIC_MANIFEST", DEPLOYED)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "servestatic.storage.CompressedManifestStaticFilesStorage"
        if ADKWEB_STATIC_MANIFEST
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
SERVESTATIC_USE_FINDERS = not ADKWEB_STATIC_MANIFEST
SERVESTATIC_AUTOREFRESH = DEBUG and not ADKWEB_STATIC_MANIFEST  # `make run`: edited files show at once
SERVESTATIC_MAX_AGE = int(os.environ.get("ADKWEB_STATIC_MAX_AGE", "3600"))  # unhashed names; hashed: a year
# Uploaded and agent-made files (ADK artifacts) in Django's default storage; set STORAGES for S3 etc.
MEDIA_ROOT = os.environ.get("ADKWEB_MEDIA_ROOT", str(BASE_DIR / "media"))
MEDIA_URL = "media/"  # not served: artifacts are downloaded through permission-checked views

# --- Redis, Channels, Celery ------------------------------------------------------------
if REDIS_URL and (refusal := redis_url_refusal(REDIS_URL)):
    raise ImproperlyConfigured(refusal)
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "adkweb.channel_layers.RedisChannelLayer",  # channels_redis's, cheaper to receive
            # redis-py 8 reads with a 5 s socket_timeout by default, which aborts channels_redis's
            # blocking 5 s BZPOPMIN: every idle websocket consumer died after 5 s
            # (django/channels_redis#422). Keep a read timeout, above the pop's.
            "CONFIG": {
                "hosts": [{"address": REDIS_URL, "socket_timeout": 30}],
                "prefix": os.environ.get("CHANNELS_PREFIX", "adkweb"),
            },
        }
    }
    CELERY_BROKER_URL = REDIS_URL
    CELERY_BROKER_TRANSPORT_OPTIONS: dict = {}
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "adkweb.channel_layers.ThreadSafeInMemoryChannelLayer"}}
    CELERY_BROKER_URL = "memory://"
    # kombu's memory transport, woken by each publish rather than polling (adkweb.memory_broker).
    CELERY_BROKER_TRANSPORT = "adkweb.memory_broker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {}

CELERY_TASK_DEFAULT_QUEUE = "agents"
# Workers and beat log with LOGGING's format (time, level, logger, ids), not Celery's own.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Notifications have a queue of their own: a slow SMTP server or webhook never delays an agent's turn.
# A worker started without -Q consumes both (the embedded one does); see the Procfile.
CELERY_TASK_QUEUES = (Queue("agents"), Queue("notifications"))
CELERY_TASK_ROUTES = {
    "agents_app.tasks.*": {"queue": "agents"},
    "notifications.tasks.*": {"queue": "notifications"},
    "approvals.tasks.*": {"queue": "agents"},
}
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Workers run tasks on threads: a turn mostly waits (on its model, tools, the database and Redis),
# and each worker thread keeps an event loop, a database thread and runners for its turns
# (agents_app.worker_loop). Measured against prefork (bench/README.md, phase 3 of turn_path.py):
# threads hand a task over without a process hop and run more turns per MiB. Each running turn
# holds one pooled connection (its loop's database thread) and its lease heartbeat one for a moment
# every few seconds: keep concurrency x 2 + a few under DATABASE_POOL_MAX_SIZE.
# `celery worker --pool/--concurrency` override these; the integration tests' workers use them.
CELERY_WORKER_POOL = os.environ.get("ADKWEB_WORKER_POOL", "threads")
CELERY_WORKER_CONCURRENCY = int(os.environ.get("ADKWEB_WORKER_CONCURRENCY", "8"))
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Reconnect to the broker every second after an outage (agents_app.broker.Consumer).
CELERY_WORKER_CONSUMER = "agents_app.broker:Consumer"
# How often tickets' reminders, escalations and expiry are looked for (approval policies).
ADKWEB_DEADLINE_SWEEP_SECONDS = float(os.environ.get("ADKWEB_DEADLINE_SWEEP_SECONDS", "10"))
# What beat sends in services mode; in embedded mode the sweeper thread sends the same tasks.
CELERY_BEAT_SCHEDULE = {
    "requeue-owed-turns": {"task": "agents_app.tasks.turns_requeue_owed", "schedule": 15.0},
    "sweep-owed-notifications": {"task": "notifications.tasks.notifications_sweep", "schedule": 15.0},
    "ticket-deadlines": {"task": "approvals.tasks.deadlines_sweep", "schedule": ADKWEB_DEADLINE_SWEEP_SECONDS},
}
# Start a Celery worker thread (and the owed-work sweeper) inside the ASGI process.
ADKWEB_EMBEDDED_WORKER = env_bool("ADKWEB_EMBEDDED_WORKER", EMBEDDED)

# --- Agents (adkweb/settings_agents.py); operations: probes, metrics, the garbage collector
# (adkweb/settings_ops.py); notifications: email, webhooks, one-tap approval links (adkweb/settings_notify.py)
from adkweb.settings_agents import *  # noqa: E402,F403
from adkweb.settings_notify import *  # noqa: E402,F403
from adkweb.settings_ops import *  # noqa: E402,F403

# --- Logging: every line with its time, level, logger and ids (adkweb/settings_logging.py) ---------
# Celery's workers and beat log through it too (CELERY_WORKER_HIJACK_ROOT_LOGGER above); the in-process
# worker stays quiet (no line per task every few seconds).
LOGGING = logging_settings(level=os.environ.get("LOG_LEVEL", "INFO"), quiet_celery=ADKWEB_EMBEDDED_WORKER)
# Show the demo logins on the login page (embedded demo only; never where real users log in).
ADKWEB_SHOW_DEMO_LOGINS = env_bool("ADKWEB_SHOW_DEMO_LOGINS", not DEPLOYED and DEBUG)
