"""`make run PORT=...` (and HOST): a newcomer whose port 8000 is taken runs the demo elsewhere, and the links
in its notifications (emails, one-tap approval links: ADKWEB_BASE_URL) point where it serves. Before, `make run`
always served 127.0.0.1:8000 (a taken port failed after migrating, with daphne's error) and the links always
said 8000. The Makefile's commands are read with `make -n`; one real `make run` on a free port answers its login
page and prints emails whose links carry that port."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx

from tests.integration.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
STAMP = ".venv/.installed-run"  # installed already: `make` is not to reinstall (-o: taken as up to date)


def _env(**extra: str) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp"), **extra}


def _dry(*args: str, **env: str) -> list[str]:
    done = subprocess.run(
        ["make", "-n", "-o", STAMP, *args], cwd=ROOT, env=_env(**env), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def _line(lines: list[str], word: str) -> str:
    return next(line for line in lines if word in line)


def test_make_run_serves_on_the_port_and_host_given_and_links_follow():
    default = _dry("run")
    assert _line(default, "runserver").endswith("manage.py runserver 127.0.0.1:8000 --noreload")
    assert _line(default, "runserver").startswith("ADKWEB_BASE_URL=http://127.0.0.1:8000 ")

    lines = _dry("run", "PORT=8123")
    assert _line(lines, "runserver").startswith("ADKWEB_BASE_URL=http://127.0.0.1:8123 ")
    assert _line(lines, "runserver").endswith("runserver 127.0.0.1:8123 --noreload")
    assert _line(lines, "demo_setup").startswith("ADKWEB_BASE_URL=http://127.0.0.1:8123 ")  # its tickets' links
    assert _line(lines, 'echo "adkweb: http').startswith('echo "adkweb: http://127.0.0.1:8123 ')  # what it says
    assert _line(_dry("run", PORT="8124"), "runserver").endswith("runserver 127.0.0.1:8124 --noreload")

    # Every interface: links name this machine's loopback, not 0.0.0.0; a set ADKWEB_BASE_URL is kept.
    anywhere = _line(_dry("run", "HOST=0.0.0.0", "PORT=9000"), "runserver")
    assert anywhere.startswith("ADKWEB_BASE_URL=http://127.0.0.1:9000 ") and "runserver 0.0.0.0:9000 " in anywhere
    named = _line(_dry("run", "PORT=9000", ADKWEB_BASE_URL="https://demo.example.com"), "runserver")
    assert named.startswith("ADKWEB_BASE_URL=https://demo.example.com ")
    # HOST from the environment (some shells export the machine's name there) is not taken.
    assert "runserver 127.0.0.1:8000 " in _line(_dry("run", HOST="somebox"), "runserver")

    services = _dry("services-run", "PORT=8125")
    assert _line(services, "honcho start").endswith("honcho start --port 8125")  # the Procfile's web: $PORT
    assert _line(services, "honcho start").startswith("ADKWEB_BASE_URL=http://127.0.0.1:8125 ")
    assert "-p ${PORT:-8000} " in (ROOT / "Procfile").read_text()


def test_make_run_on_a_taken_port_says_so_before_doing_anything():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            ["make", "-o", STAMP, "run", f"PORT={port}"],
            cwd=ROOT,
            env=_env(DATABASE_URL="sqlite:////nonexistent/dir/db.sqlite3"),  # never reached
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode != 0
    assert f"adkweb: port {port} on 127.0.0.1 is in use (another server?): pick another, e.g. make run PORT=8001" in (
        done.stdout
    )
    assert "migrate" not in done.stdout + done.stderr


def test_a_real_make_run_on_another_port_answers_there_and_its_emails_link_there(tmp_path):
    port = free_port()
    log = open(tmp_path / "make-run.log", "w+")
    make = subprocess.Popen(
        ["make", "-o", STAMP, "run", f"PORT={port}"],
        cwd=ROOT,
        env=_env(DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}", ADKWEB_MEDIA_ROOT=str(tmp_path / "media")),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline, page = time.monotonic() + 150, None
        while time.monotonic() < deadline and make.poll() is None:
            try:
                page = httpx.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=5)
                break
            except httpx.TransportError:
                time.sleep(0.5)
        text = (tmp_path / "make-run.log").read_text()
        assert page is not None and page.status_code == 200, text[-3000:]
        assert 'name="password"' in page.text
        assert f"adkweb: http://127.0.0.1:{port}  (logins:" in text
        # The demo's waiting tickets were announced: the emails printed (console backend) link to this port.
        while time.monotonic() < deadline and "/a/" not in text:
            time.sleep(0.5)
            text = (tmp_path / "make-run.log").read_text()
        links = set(re.findall(r"http://127\.0\.0\.1:(\d+)/", text))
        assert links == {str(port)}, text[-3000:]
    finally:
        os.killpg(make.pid, signal.SIGTERM)
        make.wait(timeout=30)
        log.close()


def test_make_services_run_without_the_services_says_so_before_doing_anything():
    """Before, `make services-run` with no DATABASE_URL and REDIS_URL (a .env copied from .env.example, whose
    lines are commented) migrated a SQLite file and started the Procfile's web in embedded mode beside workers
    on an in-memory broker nobody shared: it looked like services mode and was not."""
    if (ROOT / ".env").exists():
        return  # honcho reads it: this checkout's own services would be used
    for target in ("services-run", "services-demo"):
        done = subprocess.run(
            ["make", "-o", STAMP, target, "PORT=1"], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=60
        )
        assert done.returncode != 0
        assert f"adkweb: make {target} runs services mode: set DATABASE_URL and REDIS_URL" in done.stderr
        assert "migrate" not in done.stdout + done.stderr
