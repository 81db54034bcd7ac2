"""The README's HTTP API example, run as written (bash, curl, python3) against a live adkweb and its worker:
the session, the /run that pauses on a ticket, the approved FunctionResponse and the agent's "Done: I
reimbursed $200.00 for meals.", then the approvals API. Before, it answered the pause with the id "call-1",
which no call has (the demo model's ids are random): "Function call not found for function response ids:
call-1", and rejected ticket 7, which `make run`'s demo does not have (404). Then it rejected the newest open
ticket it found: in services mode (`make services-demo`: no demo conversations) there was none, and the
example stopped with an IndexError; now it opens the ticket it rejects (a hotel, $450)."""

from __future__ import annotations

import io
import re
import subprocess
from pathlib import Path

from django.core.management import call_command

from approvals.models import PendingCall
from tests.approvals_factories import ticket

pytest_plugins = ["tests.conftest_live"]

README = Path(__file__).resolve().parents[2] / "README.md"
KEY_LINE = "KEY=$(.venv/bin/python manage.py create_api_token approver)"


def _example() -> str:
    """The README's shell block that follows "The seed's client loop, over HTTP:"."""
    text = README.read_text()
    after = text[text.index("The seed's client loop, over HTTP") :]
    return re.search(r"```sh\n(.*?)```", after, re.S).group(1)  # type: ignore[union-attr]


def test_the_readmes_api_example_runs_as_written(demo, worker, live_asgi):
    waiting = ticket()  # the demo's waiting tickets (make run): the example leaves them alone
    out = io.StringIO()
    call_command("create_api_token", "approver", stdout=out)
    key = out.getvalue().strip()
    assert re.fullmatch(r"\S+", key), key  # the command prints the key alone: $(...) takes it
    script = _example()
    assert KEY_LINE in script
    script = script.replace(KEY_LINE, f"KEY={key}").replace("http://127.0.0.1:8000", live_asgi.url)
    done = subprocess.run(["bash", "-eu", "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Done: I reimbursed $200.00 for meals." in done.stdout, done.stdout
    assert '"detail"' not in done.stdout, done.stdout  # no refusal on the way
    meals, hotel = PendingCall.objects.filter(session__session_id="s1").order_by("pk")
    assert (meals.status, hotel.status) == ("approved", "rejected")  # it rejects the ticket it opened itself
    assert PendingCall.objects.get(pk=waiting.pk).status == "pending"  # not one it found waiting
    assert '"action": "reject"' in done.stdout or '"action":"reject"' in done.stdout, done.stdout
