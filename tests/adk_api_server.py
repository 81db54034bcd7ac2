"""A real `adk api_server` (the installed google-adk) in a subprocess, for tests that compare adkweb
with ADK itself or drive a remote ADK server.

    with AdkApiServer(AGENTS_DIR) as adk:        # tests/adk_agents by default
        httpx.get(adk.url + "/list-apps").json()  # ["cmp_reimburse", ...]

or, in a test module, the session-scoped fixture:

    pytest_plugins = ["tests.adk_api_server"]

    def test_something(adk_api_server):
        adk_api_server.url

The server listens on 127.0.0.1 and a free port, keeps sessions in memory (ADK's default), has no
authentication, and imports the agents folder with the repository root on PYTHONPATH (so agents
can use `agents_app.demo`). Its output goes to a log file (`server.log_path`) that a failing test
can read. It is stopped (SIGTERM, then SIGKILL) when the block or the test session ends; `start()`
after `stop()` brings it back on the same port (a remote server that was down and is up again).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

REPO = Path(__file__).resolve().parent.parent
AGENTS_DIR = Path(__file__).resolve().parent / "adk_agents"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class AdkApiServer:
    """`python -m google.adk.cli api_server --port P AGENTS_DIR`, waited for until /health answers."""

    def __init__(
        self, agents_dir: Path | str = AGENTS_DIR, *, extra_args: list[str] | None = None, port: int = 0
    ) -> None:
        self.agents_dir = str(agents_dir)
        self.extra_args = list(extra_args or [])
        self.port = port  # 0: a free one, chosen by start() and kept for a later start() (down, then up)
        self.process: subprocess.Popen | None = None
        self.log_path = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> AdkApiServer:
        self.port = self.port or _free_port()
        log = tempfile.NamedTemporaryFile(prefix="adk-api-server-", suffix=".log", delete=False)
        self.log_path = log.name
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        for name in ("DJANGO_SETTINGS_MODULE", "GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI"):
            env.pop(name, None)  # the ADK server knows nothing of Django, and never calls a real model
        command = [sys.executable, "-m", "google.adk.cli", "api_server", "--host", "127.0.0.1"]
        # In-memory sessions and artifacts unless the extra arguments name services: nothing written into
        # the agents folder, nothing kept.
        services = any(a.startswith(("--session_service_uri", "--artifact_service_uri")) for a in self.extra_args)
        local = [] if services else ["--no_use_local_storage"]
        command += ["--port", str(self.port), *local, *self.extra_args, self.agents_dir]
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(REPO))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"adk api_server exited with {self.process.returncode}:\n{self.log()}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"adk api_server did not answer within {timeout:g} s:\n{self.log()}")

    def log(self) -> str:
        return Path(self.log_path).read_text(errors="replace")[-4000:] if self.log_path else ""

    def stop(self, timeout: float = 10.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout)

    def __enter__(self) -> AdkApiServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


@pytest.fixture(scope="session")
def adk_api_server() -> Iterator[AdkApiServer]:
    """One `adk api_server` on tests/adk_agents for the whole test session."""
    with AdkApiServer() as server:
        yield server
