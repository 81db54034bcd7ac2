"""Safe defaults outside the embedded demo, shown on fresh processes (settings are read once, at start):
DEBUG off and a secret key required as soon as DATABASE_URL or REDIS_URL names a server, the embedded
demo unchanged with no environment at all, and `manage.py check --deploy` clean with the production
environment the README documents (read from the README itself, so the two cannot drift apart)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVICES = {
    "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/adkweb_settings_check",
    "REDIS_URL": "redis://127.0.0.1:1/0",
}
KEY = "k" * 20 + "-settings-test-key-0123456789-abcdefghijklmnop"
SHOW = "from django.conf import settings as s; print(s.DEBUG, s.SECRET_KEY == {key!r}, s.DEPLOYED)"


def _run(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    """A process with only what the caller gives (no inherited DJANGO_*, DATABASE_URL or REDIS_URL)."""
    clean = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp"), "PYTHONPATH": str(ROOT)}
    clean.setdefault("DJANGO_SETTINGS_MODULE", "adkweb.settings")
    return subprocess.run(args, cwd=ROOT, env={**clean, **env}, capture_output=True, text=True, timeout=120)


def _settings(**env: str) -> subprocess.CompletedProcess[str]:
    code = "import django; django.setup(); " + SHOW.format(key=KEY)
    return _run([sys.executable, "-c", code], **env)


def test_the_embedded_demo_needs_no_environment():
    done = _settings()
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False", "False"]  # DEBUG on, the dev-only key, not deployed
    with_sqlite_url = _settings(DATABASE_URL="sqlite:////tmp/adkweb-settings-test.sqlite3")
    assert with_sqlite_url.stdout.split() == ["True", "False", "False"], with_sqlite_url.stderr


def test_outside_the_embedded_demo_a_missing_secret_key_stops_the_process_with_a_clear_message():
    for env in (SERVICES, {"REDIS_URL": SERVICES["REDIS_URL"]}, {"DATABASE_URL": SERVICES["DATABASE_URL"]}):
        for key in ({}, {"DJANGO_SECRET_KEY": ""}):
            done = _settings(**env, **key)
            assert done.returncode != 0 and done.stdout == ""
            last = done.stderr.strip().splitlines()[-1]
            assert last.startswith("django.core.exceptions.ImproperlyConfigured: DJANGO_SECRET_KEY is not set.")
            assert "secrets.token_urlsafe" in last  # says how to make one
    # The same for the server and the worker as they are started (manage.py, celery).
    web = _run([sys.executable, "manage.py", "check"], **SERVICES)
    assert web.returncode != 0 and "DJANGO_SECRET_KEY is not set" in web.stderr
    worker = _run([sys.executable, "-m", "celery", "-A", "adkweb", "report"], **SERVICES)
    assert worker.returncode != 0 and "DJANGO_SECRET_KEY is not set" in worker.stderr


def test_outside_the_embedded_demo_a_weak_secret_key_stops_the_process_saying_why():
    """Before, any non-empty key started a deployment: the README's `DJANGO_SECRET_KEY=...` copied as written,
    `changeme`, the embedded demo's published key. Now what Django's `check --deploy` calls weak (W009) stops
    every process at start, as a missing key does; the embedded demo takes any key."""
    weak = {
        "...": "it is a published example",  # the README's production block, copied as written
        "dev-only-insecure-key-for-the-embedded-demo": "it is a published example",
        "django-insecure-" + "x1y2z3" * 10: "it is a published example",
        "changeme": "8 characters, at least 50 are needed",
        "ab" * 40: "2 distinct characters, at least 5 are needed",
    }
    for key, why in weak.items():
        done = _settings(**SERVICES, DJANGO_SECRET_KEY=key)
        assert done.returncode != 0 and done.stdout == "", done.stdout
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith(f"django.core.exceptions.ImproperlyConfigured: DJANGO_SECRET_KEY is too weak: {why}")
        assert "secrets.token_urlsafe(50)" in last
    assert _settings(DJANGO_SECRET_KEY="changeme").returncode == 0  # the embedded demo signs nothing that leaves


def test_outside_the_embedded_demo_a_weak_metrics_token_stops_the_process_saying_why():
    """Before, the README's `ADKWEB_METRICS_TOKEN=...` kept as written let anyone read /metrics with
    `Authorization: Bearer ...`. Now a token under 16 characters (or of under 5 distinct ones) stops a deployment
    at start; unset is fine (staff logins only), and so is the embedded demo."""
    for token, said in (("...", "3 characters (1 distinct)"), ("metrics", "7 characters (7 distinct)")):
        done = _settings(**SERVICES, DJANGO_SECRET_KEY=KEY, ADKWEB_METRICS_TOKEN=token)
        assert done.returncode != 0 and done.stdout == "", done.stdout
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith("django.core.exceptions.ImproperlyConfigured: ADKWEB_METRICS_TOKEN is too weak to guard")
        assert f"/metrics: {said}, at least 16 (5 distinct) are needed" in last and "token_urlsafe(32)" in last
    assert _settings(**SERVICES, DJANGO_SECRET_KEY=KEY, ADKWEB_METRICS_TOKEN="x" * 16).returncode != 0
    assert _settings(**SERVICES, DJANGO_SECRET_KEY=KEY, ADKWEB_METRICS_TOKEN="gc-test-metrics-token").returncode == 0
    assert _settings(**SERVICES, DJANGO_SECRET_KEY=KEY).returncode == 0  # unset: staff logins only
    assert _settings(ADKWEB_METRICS_TOKEN="...").returncode == 0  # the embedded demo


def test_outside_the_embedded_demo_debug_is_off_unless_asked_for():
    done = _settings(**SERVICES, DJANGO_SECRET_KEY=KEY)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True", "True"]
    asked = _settings(**SERVICES, DJANGO_SECRET_KEY=KEY, DJANGO_DEBUG="true")
    assert asked.stdout.split() == ["True", "True", "True"], asked.stderr


def readme_production_env() -> dict[str, str]:
    """The `KEY=value` lines of the README's production environment block (```sh after its marker)."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- production-env -->\s*```sh\n(.*?)```", text, re.S)
    assert block, "README.md has no production environment block"
    env = {}
    for line in block.group(1).splitlines():
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith("#"):
            name, _, value = line.removeprefix("export ").partition("=")
            env[name] = value.strip("'\"")
    return env


def test_check_deploy_passes_with_the_documented_production_environment():
    env = readme_production_env()
    assert {"DATABASE_URL", "REDIS_URL", "DJANGO_SECRET_KEY", "DJANGO_SECURE_HSTS_SECONDS"} <= env.keys()
    env["DJANGO_SECRET_KEY"] = KEY  # the README shows how to make one, not a value
    env["ADKWEB_METRICS_TOKEN"] = "metrics-token-" + KEY[-24:]  # likewise
    done = _run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], **env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout, done.stdout + done.stderr

    # Without the HTTPS settings the same check names what is missing (so the block above matters).
    bare = {k: v for k, v in env.items() if not k.startswith("DJANGO_SECURE_")}
    warned = _run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], **bare)
    assert warned.returncode != 0
    assert all(code in warned.stderr + warned.stdout for code in ("W004", "W008", "W012", "W016"))


def test_https_settings_come_from_the_environment():
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.SECURE_PROXY_SSL_HEADER, s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS, "
        "s.SECURE_HSTS_INCLUDE_SUBDOMAINS, s.SECURE_HSTS_PRELOAD, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, "
        "s.ALLOWED_HOSTS, s.CSRF_TRUSTED_ORIGINS)"
    )
    env = {
        **SERVICES,
        "DJANGO_SECRET_KEY": KEY,
        "DJANGO_SECURE_PROXY_SSL_HEADER": "true",
        "DJANGO_SECURE_SSL_REDIRECT": "true",
        "DJANGO_SECURE_HSTS_SECONDS": "600",
        "DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS": "yes",
        "DJANGO_SECURE_HSTS_PRELOAD": "1",
        "DJANGO_SECURE_COOKIES": "on",
        "DJANGO_ALLOWED_HOSTS": "a.example.com, b.example.com",
        "DJANGO_CSRF_TRUSTED_ORIGINS": "https://a.example.com",
    }
    done = _run([sys.executable, "-c", code], **env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "('HTTP_X_FORWARDED_PROTO', 'https') True 600 True True True True "
        "['a.example.com', 'b.example.com'] ['https://a.example.com']"
    )
    defaults = _run([sys.executable, "-c", code], **SERVICES, DJANGO_SECRET_KEY=KEY)
    assert defaults.stdout.strip() == (
        "None False 0 False False False False ['127.0.0.1', 'localhost', 'testserver'] []"
    ), defaults.stderr


def test_said_a_pooler_is_there_connections_send_no_startup_options():
    """PgBouncer refuses the `options` startup parameter; in transaction mode nothing may outlive a
    transaction (agents_app.pooler): no server-side cursors. A value it does not know stops the process."""
    code = (
        "import django; django.setup(); from django.conf import settings as s; d = s.DATABASES['default']; "
        "print(repr(d['OPTIONS'].get('options')), d.get('DISABLE_SERVER_SIDE_CURSORS', False), s.ADKWEB_DB_POOLER)"
    )
    env = {**SERVICES, "DJANGO_SECRET_KEY": KEY}
    seen = {
        mode: _run([sys.executable, "-c", code], **env, ADKWEB_DB_POOLER=mode)
        for mode in ("", "session", "transaction")
    }
    assert [done.stdout.split() for done in seen.values()] == [
        ["'-c", "jit=off'", "False"],
        ["None", "False", "session"],
        ["None", "True", "transaction"],
    ], {mode: done.stderr[-500:] for mode, done in seen.items()}
    wrong = _run([sys.executable, "-c", code], **env, ADKWEB_DB_POOLER="statement")
    assert wrong.returncode != 0 and "ADKWEB_DB_POOLER must be transaction, session, none or auto" in wrong.stderr
