"""A JSON form field (adkweb.storable.StorableJSONField: the agent admin's generation settings) given a
number of more than 4,300 digits or nesting deeper than the parser's recursion: Django's JSONField only
catches the parser's JSONDecodeError, and int() refuses such a number with a plain ValueError (so does
RecursionError reach past it): a 500, on saving and on showing the form again. Now the field's error."""

from __future__ import annotations

import pytest
from django.test import Client

from agents_app.models import AgentConfig

VALUES = {
    "5,000 digits": "9" * 5000,
    "5,000 digits inside": '{"temperature": ' + "9" * 5000 + "}",
    "nested 100,000 deep": "[" * 100_000 + "]" * 100_000,
}


@pytest.mark.parametrize("value", VALUES.values(), ids=VALUES.keys())
def test_json_that_no_parser_reads_is_the_fields_error(demo, value):
    c = Client()
    c.force_login(demo["admin"])
    before = sorted(AgentConfig.objects.values_list("pk", "generation_settings", "version"))
    form = {"name": "fuzzed_agent", "model": "demo-offline", "instruction": "x", "generation_settings": value}
    for path in ["/admin/agents_app/agentconfig/add/", f"/admin/agents_app/agentconfig/{before[0][0]}/change/"]:
        r = c.post(path, form)
        assert r.status_code == 200, (path, r.status_code)
        assert "Enter a valid JSON." in r.content.decode(), path
    assert sorted(AgentConfig.objects.values_list("pk", "generation_settings", "version")) == before
    assert not AgentConfig.objects.filter(name="fuzzed_agent").exists()
