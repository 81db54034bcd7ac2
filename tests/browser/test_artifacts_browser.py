"""In a real browser: a tool saves an image artifact; the open conversation page lists it live,
previews the image and downloads it."""

from __future__ import annotations

import re
import struct
import zlib
from typing import Any

import pytest
from playwright.sync_api import expect


def png(width: int = 160, height: int = 90) -> bytes:
    """A real (decodable) PNG: a small red rectangle."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


async def draw_chart(title: str, tool_context: Any) -> dict:
    """Draw a chart and keep it as an artifact."""
    from google.genai import types

    version = await tool_context.save_artifact(
        f"{title}.png", types.Part(inline_data=types.Blob(mime_type="image/png", data=png()))
    )
    return {"saved": f"{title}.png", "version": version}


def _agent() -> Any:
    from google.adk.agents import LlmAgent

    from agents_app.demo.model import DemoLlm

    return LlmAgent(name="chart_agent", model=DemoLlm(model="demo-offline"), tools=[draw_chart])


chart_agent = _agent()


@pytest.fixture
def chart_app(settings):
    settings.ADKWEB_CODE_AGENTS = {"chart_agent": f"{__name__}.chart_agent"}


def test_a_saved_image_appears_live_previewed_and_downloads(demo, worker, login, shot, chart_app, tmp_path):
    page = login("requester")
    page.goto("/sessions/new/")
    page.get_by_label("Agent").select_option("chart_agent")
    page.get_by_label("First message").fill("hello")
    page.get_by_role("button", name="Start conversation").click()
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))
    expect(page.locator("#conversation-artifacts")).to_be_hidden()  # nothing saved yet

    page.get_by_label("Message").fill('/call draw_chart {"title": "q3"}')
    page.get_by_role("button", name="Send").click()
    artifacts = page.locator("#conversation-artifacts")
    expect(artifacts).to_be_visible()  # live: no reload
    expect(artifacts).to_contain_text("q3.png")
    expect(artifacts).to_contain_text("image/png")
    preview = artifacts.get_by_role("img", name="Preview of q3.png")
    expect(preview).to_be_visible()
    assert preview.evaluate("img => img.complete && img.naturalWidth") == 160, "the image decodes in the page"
    shot(page, "conversation-artifacts")

    with page.expect_download() as download:
        artifacts.get_by_role("link", name="q3.png", exact=True).click()
    target = tmp_path / "q3.png"
    download.value.save_as(target)
    assert target.read_bytes() == png()
    assert download.value.suggested_filename == "q3.png"
