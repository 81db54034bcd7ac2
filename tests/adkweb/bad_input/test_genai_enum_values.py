"""A field of ADK's message types that takes one of an enumeration's names (a function response's
`scheduling`, executable code's `language`, a code result's `outcome`, a part's `mediaResolution.level`)
given a number, a boolean, a list or an object: google.genai's enums read the name with `value.upper()`,
whose AttributeError escapes pydantic's validation: a 500 on /run, /run_sse and saving an artifact. Now a
422 in ADK's shape (FastAPI's `detail` list) whose `loc` names the field, nothing stored."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.adkweb.bad_input.sweep import Objs, _client, _refusal, attempt

S = "/api/adk/apps/reimbursement_agent/users/requester/sessions"
RUN = {"appName": "reimbursement_agent", "userId": "requester", "sessionId": "s-bad"}


def _cases(o: Objs, bad: Any) -> list[tuple[str, str, dict, str]]:
    """(who, path, body, the field's name)."""
    fr = {"id": o.call.call_id, "name": o.call.call_name, "response": {"status": "approved"}, "scheduling": bad}

    def msg(*parts: dict) -> dict:
        return {**RUN, "newMessage": {"role": "user", "parts": list(parts)}}

    return [
        ("admin", "/api/adk/run", msg({"functionResponse": fr}), "scheduling"),
        ("admin", "/api/adk/run_sse", msg({"functionResponse": fr}), "scheduling"),
        (
            "requester",
            "/api/adk/run",
            msg({"text": "hi"}, {"executableCode": {"code": "1", "language": bad}}),
            "language",
        ),
        ("requester", "/api/adk/run", msg({"codeExecutionResult": {"outcome": bad, "output": "1"}}), "outcome"),
        ("requester", "/api/adk/run", msg({"text": "hi", "mediaResolution": {"level": bad}}), "level"),
        (
            "requester",
            f"{S}/s-bad/artifacts",
            {"filename": "a.txt", "artifact": {"text": "x", "mediaResolution": {"level": bad}}},
            "level",
        ),
    ]


@pytest.mark.parametrize(
    "bad", [0, 2**63, 1.5, True, [], {"a": 1}], ids=["0", "2**63", "1.5", "true", "list", "object"]
)
def test_an_enum_field_that_is_not_a_name_is_a_422(demo, objs: Objs, bad: Any):
    failures: list[str] = []
    for who, path, body, field in _cases(objs, bad):
        c = _client(objs, "requester")
        if who == "admin":
            c.force_login(demo["admin"])
        r, before, after = attempt(c, "POST", path, json.dumps(body))
        failures += _refusal(f"POST {path} as {who} with {field}={bad!r}", r, before, after, api=True)
        if r.status_code == 422 and r.json()["detail"][0]["loc"][-1] != field:
            failures.append(f"POST {path} {field}={bad!r}: 422 not naming the field: {r.content[:300]!r}")
    assert not failures, "\n".join(failures)


def test_an_enum_field_given_its_name_is_taken(objs: Objs):
    c = _client(objs, "requester")
    art = {"filename": "a.txt", "artifact": {"text": "x", "mediaResolution": {"level": "MEDIA_RESOLUTION_LOW"}}}
    r = c.post(f"{S}/s-bad/artifacts", data=json.dumps(art), content_type="application/json")
    assert r.status_code == 200, r.content[:300]
