"""A tiny local server speaking the Gemini API's generateContent protocol, for tests.

    with GeminiServer(replies=[function_call_reply("get_stock_price", {"symbol": "GOOG"}),
                               text_reply("GOOG is at $178.42.")]) as server:
        settings.GEMINI_BASE_URL = server.base_url
        ...
    server.requests  # every JSON body received, with its path

Answers `POST /v1beta/models/<model>:generateContent` (and Vertex AI's
`/v1beta1/projects/<p>/locations/<l>/publishers/google/models/<model>:generateContent`) with the
next scripted reply, and
`:streamGenerateContent?alt=sse` with the same reply as one SSE `data:` line. Once the script is
used up it answers 500, so an unexpected extra call fails the run loudly.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# The Gemini Developer API's path, and Vertex AI's (`vertexai=True`: projects/<p>/locations/<l>/publishers/google).
PATH_RE = re.compile(
    r"^/(?P<version>v1beta1?)/(?:projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/publishers/google/)?"
    r"models/(?P<model>[^:/]+):(?P<method>generateContent|streamGenerateContent)(\?.*)?$"
)


def _reply(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 5, "totalTokenCount": 17},
        "modelVersion": "gemini-2.5-flash",
    }


def function_call_reply(name: str, args: dict[str, Any], call_id: str = "gemini-call-1") -> dict[str, Any]:
    return _reply([{"functionCall": {"id": call_id, "name": name, "args": args}}])


def text_reply(text: str) -> dict[str, Any]:
    return _reply([{"text": text}])


class GeminiServer:
    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                match = PATH_RE.match(self.path)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                with outer._lock:
                    outer.requests.append(
                        {
                            "path": self.path,
                            "model": match and match["model"],
                            "api_key": self.headers.get("x-goog-api-key"),
                            "authorization": self.headers.get("authorization"),
                            "body": body,
                        }
                    )
                    reply = outer.replies.pop(0) if match and outer.replies else None
                if reply is None:
                    self._send(
                        500 if match else 404,
                        {"error": {"code": 500, "message": "no scripted reply", "status": "INTERNAL"}},
                    )
                elif match["method"] == "streamGenerateContent":
                    self._send(200, f"data: {json.dumps(reply)}\r\n\r\n", "text/event-stream")
                else:
                    self._send(200, reply)

            def _send(self, status: int, payload: Any, content_type: str = "application/json") -> None:
                data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="gemini-server", daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> GeminiServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
