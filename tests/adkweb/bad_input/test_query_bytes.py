"""A query string whose bytes are not UTF-8, as daphne hands it to the ASGI handler (a test client's request
is already text): Django's ASGI handler answered it with its bare 400, an empty body. Now the app's refusal
of a URL it cannot hold (StorableUrlMiddleware's): a JSON detail under /api/, a plain message for pages."""

from __future__ import annotations

import json
from typing import Any

import pytest

from adkweb.handler import ASGIHandler


async def serve(path: str, query: bytes) -> tuple[int, dict[bytes, bytes], bytes]:
    scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(), "query_string": query,
             "headers": [(b"host", b"testserver")], "client": ("127.0.0.1", 1), "server": ("testserver", 80),
             "scheme": "http", "root_path": "", "http_version": "1.1", "asgi": {"version": "3.0"}}  # fmt: skip
    sent: list[dict[str, Any]] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    await ASGIHandler()(scope, receive, send)
    start, body = sent[0], b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], dict(start["headers"]), body


QUERIES = [b"q=\xff", b"\xfe=1", b"agent=caf\xe9", b"q=\xed\xa0\x80"]  # the last: a surrogate's UTF-8-like bytes


@pytest.mark.parametrize("query", QUERIES, ids=["value", "name", "latin-1", "surrogate bytes"])
@pytest.mark.parametrize("path", ["/api/pending-calls", "/api/adk/list-apps"])
async def test_api_answers_a_query_that_is_not_utf8_with_a_json_detail(path, query):
    status, headers, body = await serve(path, query)
    assert status == 400
    assert headers[b"Content-Type"] == b"application/json"
    assert "not UTF-8" in json.loads(body)["detail"]


@pytest.mark.parametrize("query", QUERIES, ids=["value", "name", "latin-1", "surrogate bytes"])
@pytest.mark.parametrize("path", ["/", "/audit/export.csv", "/accounts/login/"])
async def test_pages_answer_a_query_that_is_not_utf8_with_a_message(path, query):
    status, headers, body = await serve(path, query)
    assert status == 400
    assert headers[b"Content-Type"].startswith(b"text/plain")
    assert "not UTF-8" in body.decode()
