"""ADK artifacts on Django storage: the BaseArtifactService contract, and tools that use it in a run."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from django.core.files.storage import default_storage
from google.adk.errors.input_validation_error import InputValidationError
from google.genai import types

from agents_app import services
from agents_app.artifacts import DjangoStorageArtifactService
from agents_app.models import Artifact
from tests.engine_scenarios import failed_turns, settle

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.fixture
def svc(transactional_db) -> DjangoStorageArtifactService:
    return DjangoStorageArtifactService()


def _png(data: bytes = PNG) -> types.Part:
    return types.Part(inline_data=types.Blob(mime_type="image/png", data=data))


def test_versions_count_from_zero_and_load_the_latest_or_a_given_one(svc):
    where = {"app_name": "app", "user_id": "u1", "session_id": "s1"}
    assert run(svc.save_artifact(**where, filename="chart.png", artifact=_png(b"one"))) == 0
    assert run(svc.save_artifact(**where, filename="chart.png", artifact=_png(b"two"), custom_metadata={"k": 1})) == 1
    assert run(svc.load_artifact(**where, filename="chart.png")).inline_data.data == b"two"
    assert run(svc.load_artifact(**where, filename="chart.png", version=0)).inline_data.data == b"one"
    assert run(svc.load_artifact(**where, filename="chart.png", version=7)) is None
    assert run(svc.list_versions(**where, filename="chart.png")) == [0, 1]
    meta = run(svc.list_artifact_versions(**where, filename="chart.png"))
    assert [(m.version, m.mime_type, m.custom_metadata) for m in meta] == [
        (0, "image/png", {}),
        (1, "image/png", {"k": 1}),
    ]
    assert meta[1].canonical_uri == "artifact://apps/app/users/u1/sessions/s1/artifacts/chart.png/versions/1"
    latest = run(svc.get_artifact_version(**where, filename="chart.png"))
    assert latest.version == 1 and latest.create_time > 0


def test_user_scoped_names_are_shared_by_the_users_sessions_only(svc):
    run(
        svc.save_artifact(
            app_name="app", user_id="u1", session_id="s1", filename="user:profile.txt", artifact=types.Part(text="x")
        )
    )
    run(
        svc.save_artifact(
            app_name="app", user_id="u1", session_id="s1", filename="notes.txt", artifact=types.Part(text="hi")
        )
    )
    assert run(svc.list_artifact_keys(app_name="app", user_id="u1", session_id="s2")) == ["user:profile.txt"]
    assert run(svc.list_artifact_keys(app_name="app", user_id="u1", session_id="s1")) == [
        "notes.txt",
        "user:profile.txt",
    ]
    assert run(svc.list_artifact_keys(app_name="app", user_id="u2", session_id="s1")) == []
    assert (
        run(svc.load_artifact(app_name="app", user_id="u1", session_id="s9", filename="user:profile.txt")).text == "x"
    )


def test_delete_removes_every_version_and_its_files(svc):
    where = {"app_name": "app", "user_id": "u1", "session_id": "s1", "filename": "a.png"}
    run(svc.save_artifact(**where, artifact=_png()))
    run(svc.save_artifact(**where, artifact=_png()))
    names = [row.content.name for row in Artifact.objects.all()]
    assert all(default_storage.exists(n) for n in names)
    run(svc.delete_artifact(**where))
    assert run(svc.list_versions(**where)) == [] and run(svc.load_artifact(**where)) is None
    assert not any(default_storage.exists(n) for n in names)


def test_bad_names_and_missing_session_are_refused(svc):
    with pytest.raises(InputValidationError):
        run(svc.save_artifact(app_name="app", user_id="../etc", session_id="s1", filename="a", artifact=_png()))
    with pytest.raises(InputValidationError):
        run(svc.save_artifact(app_name="app", user_id="u1", filename="a.png", artifact=_png()))
    with pytest.raises(InputValidationError):
        run(svc.save_artifact(app_name="app", user_id="u1", session_id="s1", filename="a", artifact=types.Part()))
    assert not Artifact.objects.exists()


@pytest.mark.parametrize(
    "filename", ["f" * 300, "..", "/", "日本語" * 80 + ".png"], ids=["long", "dots", "slash", "wide"]
)
def test_names_no_file_system_takes_are_stored_under_a_short_safe_file_name(svc, filename):
    """The stored file's name carries the artifact name's last segment: over 255 bytes the file system
    refused it (OSError), and Django refused "..", "/" (SuspiciousFileOperation): 500s through the API.
    The row keeps the whole name; the file's is short and safe."""
    where = {"app_name": "app", "user_id": "u1", "session_id": "s1", "filename": filename}
    assert run(svc.save_artifact(**where, artifact=_png())) == 0
    part = run(svc.load_artifact(**where))
    assert part is not None and part.inline_data.data == PNG
    stored = Artifact.objects.get().content.name.rsplit("/", 1)[-1]
    assert len(stored.encode()) <= 150 and ".." not in stored  # "new-", a uuid, "-", at most 100 bytes of the name


# -- in a run: tools save and load artifacts through the runner's artifact service -------------
async def save_chart(title: str, tool_context: Any) -> dict:
    """Draw a chart and keep it as an artifact."""
    version = await tool_context.save_artifact(f"{title}.png", _png())
    return {"saved": f"{title}.png", "version": version}


async def read_chart(title: str, tool_context: Any) -> dict:
    """Read back a chart artifact."""
    part = await tool_context.load_artifact(f"{title}.png")
    return {"bytes": len(part.inline_data.data) if part else 0, "names": await tool_context.list_artifacts()}


def _chart_agent() -> Any:
    from google.adk.agents import LlmAgent

    from agents_app.demo.model import DemoLlm

    return LlmAgent(name="chart_agent", model=DemoLlm(model="demo-offline"), tools=[save_chart, read_chart])


chart_agent = _chart_agent()


@pytest.fixture
def chart_app(settings):
    settings.ADKWEB_CODE_AGENTS = {"chart_agent": f"{__name__}.chart_agent"}


def test_a_tool_saves_an_artifact_and_another_turn_loads_it(demo, worker, wait, chart_app):
    session = services.session_create(app_name="chart_agent", user_id="requester")
    services.message_send(session=session, text='/call save_chart {"title": "q3"}', actor=demo["requester"])
    settle(session, wait)
    services.message_send(session=session, text='/call read_chart {"title": "q3"}', actor=demo["requester"])
    settle(session, wait)
    assert failed_turns(session) == []
    [row] = Artifact.objects.filter(app_name="chart_agent", user_id="requester", session_id=session.session_id)
    assert (row.filename, row.version, row.mime_type, row.size) == ("q3.png", 0, "image/png", len(PNG))
    responses = [e.data for e in session.events.order_by("id") if "function_response" in str(e.data)]
    read = [p["function_response"]["response"] for e in responses for p in e["content"]["parts"]][-1]
    assert read == {"bytes": len(PNG), "names": ["q3.png"]}
    # ADK records the save on the tool's event: artifactDelta {name: version}
    assert any(e.get("actions", {}).get("artifact_delta") == {"q3.png": 0} for e in responses)
