"""ADK's REST API as a client: sessions and `/run_sse` on a remote ADK server, with timeouts.

Every failure is a `RemoteError` whose message names the server and says what happened, never the
auth header. The connect timeout bounds reaching the server, the read timeout the silence between
two bytes of an answer (a remote step slower than that fails the turn): no worker waits forever.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import httpx
from django.conf import settings

from ..remote_models import RemoteApp


class RemoteError(Exception):
    """The remote ADK server could not be used; the message is for the conversation page."""


class RemoteUnavailable(RemoteError):
    """Not reachable, or it did not answer in time."""


class RemoteRefused(RemoteError):
    """It answered with an HTTP error."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class RemoteRunError(RemoteError):
    """Its run failed: an error frame in the `/run_sse` stream."""


class RemoteProtocolError(RemoteError):
    """It sent something that is not ADK's REST JSON."""


def timeouts() -> httpx.Timeout:
    connect = float(settings.ADKWEB_REMOTE_CONNECT_TIMEOUT)
    read = float(settings.ADKWEB_REMOTE_READ_TIMEOUT)
    return httpx.Timeout(connect=connect, read=read, write=read, pool=connect)


def _path(*segments: str) -> str:
    return "/".join(quote(s, safe="") for s in segments)


class RemoteClient:
    """One remote app's server: `async with RemoteClient(app) as client: ...`."""

    def __init__(self, app: RemoteApp, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.app = app
        self.label = f"Remote ADK server {app.server_label}"
        headers = {"Accept": "application/json"}
        if app.has_auth:
            headers[app.auth_header_name] = app.auth_header_value
        try:
            self.http = httpx.AsyncClient(
                base_url=app.base_url.rstrip("/") + "/", headers=headers, timeout=timeouts(), transport=transport
            )
        except httpx.InvalidURL as exc:  # a base URL stored before remote_models.validate_base_url refused it
            raise RemoteUnavailable(f"{self.label} cannot be used: its base URL is not valid ({exc}).") from exc

    async def __aenter__(self) -> RemoteClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()

    def _session_path(self, user_id: str, session_id: str = "") -> str:
        base = f"apps/{_path(self.app.remote_app_name)}/users/{_path(user_id)}/sessions"
        return f"{base}/{_path(session_id)}" if session_id else base

    # -- sessions ----------------------------------------------------------------------------
    async def get_session(self, user_id: str, session_id: str) -> dict[str, Any] | None:
        """The remote session with its events (camelCase JSON), None if it has no such session."""
        response = await self._request("GET", self._session_path(user_id, session_id))
        if response.status_code == 404:
            return None
        self._check(response, "reading the session")
        return self._json(response, dict)

    async def create_session(self, user_id: str, session_id: str, state: dict[str, Any]) -> bool:
        """Create the session with this id; False if it exists already."""
        body: dict[str, Any] = {"sessionId": session_id}
        if state:
            body["state"] = state
        response = await self._request("POST", self._session_path(user_id), json=body)
        if response.status_code in (400, 409) and "exist" in response.text.lower():
            return False
        self._check(response, "creating the session")
        return True

    async def app_info(self) -> dict[str, Any]:
        """The remote app's `/apps/{app}/app-info` (agents, instructions, tool declarations)."""
        response = await self._request("GET", f"apps/{_path(self.app.remote_app_name)}/app-info")
        self._check(response, "reading the app's info")
        return self._json(response, dict)

    # -- runs --------------------------------------------------------------------------------
    async def run_sse(self, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """Each `data:` frame of `/run_sse` as JSON; an error frame raises RemoteRunError."""
        body = {"appName": self.app.remote_app_name, **body}
        try:
            async with self.http.stream("POST", "run_sse", json=body) as response:
                if response.status_code >= 400:
                    await response.aread()
                    self._check(response, "starting the run")
                async for data in _sse_data(response):
                    frame = _decode(data, self.label)
                    if "error" in frame and "author" not in frame:
                        details = frame.get("error_details") or {}
                        kind = details.get("error_type") or "error"
                        message = details.get("error_message") or str(frame["error"])
                        raise RemoteRunError(f"{self.label}: the agent run failed ({kind}): {message}")
                    yield frame
        except httpx.HTTPError as exc:
            raise self._unavailable(exc) from exc

    # -- plumbing ----------------------------------------------------------------------------
    async def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return await self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise self._unavailable(exc) from exc

    def _unavailable(self, exc: httpx.HTTPError) -> RemoteUnavailable:
        t = timeouts()
        if isinstance(exc, httpx.ConnectTimeout):
            why = f"did not accept a connection within {t.connect:g} s (ADKWEB_REMOTE_CONNECT_TIMEOUT)"
        elif isinstance(exc, (httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout)):
            why = f"did not answer within {t.read:g} s (ADKWEB_REMOTE_READ_TIMEOUT)"
        elif isinstance(exc, httpx.ConnectError):
            why = "is unreachable (connection refused or no route)"
        elif isinstance(exc, httpx.RemoteProtocolError):
            why = "closed the connection mid-answer"
        else:
            why = f"could not be used ({type(exc).__name__})"
        return RemoteUnavailable(f"{self.label} {why}.")

    def _check(self, response: httpx.Response, doing: str) -> None:
        if response.status_code < 400:
            return
        detail = _detail(response)
        if response.status_code in (401, 403):
            detail = f"{detail} (check the app's auth header in the admin)"
        status = response.status_code
        raise RemoteRefused(f"{self.label} refused {doing}: HTTP {status}: {detail}", status)

    def _json(self, response: httpx.Response, kind: type) -> Any:
        try:
            value = response.json()
        except ValueError as exc:
            raise RemoteProtocolError(f"{self.label} answered with something that is not JSON.") from exc
        if not isinstance(value, kind):
            raise RemoteProtocolError(f"{self.label} answered with JSON of an unexpected shape.")
        return value


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return (response.text or response.reason_phrase or "").strip()[:300]
    detail = body.get("detail", body) if isinstance(body, dict) else body
    return (detail if isinstance(detail, str) else json.dumps(detail, ensure_ascii=False))[:300]


async def _sse_data(response: httpx.Response) -> AsyncIterator[str]:
    """The data of each server-sent event (several `data:` lines join with newlines)."""
    lines: list[str] = []
    async for line in response.aiter_lines():
        if not line:
            if lines:
                yield "\n".join(lines)
                lines = []
        elif line.startswith("data:"):
            lines.append(line[5:].removeprefix(" "))
    if lines:
        yield "\n".join(lines)


def _decode(data: str, label: str) -> dict[str, Any]:
    try:
        frame = json.loads(data)
    except ValueError as exc:
        raise RemoteProtocolError(f"{label} sent an event that is not JSON.") from exc
    if not isinstance(frame, dict):
        raise RemoteProtocolError(f"{label} sent an event that is not a JSON object.")
    return frame
