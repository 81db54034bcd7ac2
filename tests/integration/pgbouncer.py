"""A real PgBouncer (Debian's `pgbouncer`, 1.18: no protocol-level prepared statements) in front of the
test's PostgreSQL, for tests/integration/test_pooler*.py: a temporary ini, a free port, trust
authentication, `server_round_robin` so that a client's consecutive transactions take the pool's server
connections in turn (PgBouncer's default hands the last one back: a single client would rarely change
server and a test would pass by luck). PgBouncer refuses to run as root: it is started as `postgres`
(or `nobody`) then. Missing, the tests fail and say how to install it (.ci/run does)."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings

from .conftest import stop
from .processes import free_port

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


def require() -> None:
    if not os.access(PGBOUNCER, os.X_OK):
        pytest.fail(f"{PGBOUNCER} is missing: apt-get install -y pgbouncer (.ci/run installs it)", pytrace=False)


def _as_user() -> list[str]:
    if os.geteuid() != 0:
        return []
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return ["-u", name]
    raise RuntimeError("PgBouncer will not run as root and there is no postgres or nobody user")


@contextmanager
def running(*, mode: str = "transaction", servers: int = 2, ignore_options: bool = True) -> Iterator[int]:
    """PgBouncer in `mode` with `servers` server connections per database and user, on the port yielded.
    `ignore_options`: it drops the `options` startup parameter (as operators configure it for clients
    that send one); otherwise it refuses such a client, as 1.18 does by default."""
    require()
    db = settings.DATABASES["default"]
    user = db["USER"] or "postgres"
    port = free_port()
    folder = Path(tempfile.mkdtemp(prefix="adkweb-pgbouncer-"))
    folder.chmod(0o777)
    ignored = "extra_float_digits,options" if ignore_options else "extra_float_digits"
    ini = folder / "pgbouncer.ini"
    ini.write_text(
        "[databases]\n"
        f"* = host={db['HOST'] or '127.0.0.1'} port={db['PORT'] or 5432}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {folder / 'users.txt'}\n"
        f"pool_mode = {mode}\ndefault_pool_size = {servers}\nmin_pool_size = 0\nreserve_pool_size = 0\n"
        "server_round_robin = 1\nmax_client_conn = 200\n"
        f"ignore_startup_parameters = {ignored}\n"
        f"logfile = {folder / 'pgbouncer.log'}\n"
    )
    (folder / "users.txt").write_text(f'"{user}" ""\n')
    for path in folder.iterdir():
        path.chmod(0o644)
    proc = subprocess.Popen([PGBOUNCER, *_as_user(), str(ini)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while True:
            if proc.poll() is not None:
                log = folder / "pgbouncer.log"
                raise RuntimeError(
                    f"pgbouncer exited: {proc.stderr.read() if proc.stderr else ''!r} "
                    f"{log.read_text() if log.exists() else ''}"
                )
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        yield port
    finally:
        stop(proc, timeout=10)
        shutil.rmtree(folder, ignore_errors=True)
