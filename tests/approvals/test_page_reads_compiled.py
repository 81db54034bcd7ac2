"""Reads every inbox page (or every page of an approver) makes, compiled once per process and then only
executed: the filter menus from the configuration (agents_app.agents.menus) and the nav's saved views
(notifications.selectors.saved_views_for). They still follow what changes, and each person gets their own."""

from __future__ import annotations

from unittest import mock

import pytest
from django.db.models.sql.compiler import SQLCompiler

from agents_app.agents import menus
from agents_app.models import AgentConfig, RemoteApp
from notifications.models import SavedView
from notifications.selectors import saved_views_for

pytestmark = pytest.mark.django_db


def _compiling():  # noqa: ANN202 - a mock patcher
    return mock.patch.object(SQLCompiler, "as_sql", autospec=True, side_effect=SQLCompiler.as_sql)


def test_the_filter_menus_follow_the_configuration_without_compiling_again(demo):
    menus()
    AgentConfig.objects.create(name="menu_agent", tools=["a_configured_tool", 3])
    AgentConfig.objects.create(name="off_agent", enabled=False, tools=["off_tool"])
    RemoteApp.objects.create(name="far_app", base_url="http://far.example", remote_app_name="far")
    RemoteApp.objects.create(name="off_far_app", base_url="http://off.example", remote_app_name="off", enabled=False)
    with _compiling() as compiling:
        found = menus()
    assert compiling.call_count == 0
    assert {"menu_agent", "far_app"} <= set(found.apps) and not {"off_agent", "off_far_app"} & set(found.apps)
    assert "off_agent" in found.all_apps and "far_app" in found.all_apps
    assert {"a_configured_tool", "off_tool"} <= set(found.tools) and 3 not in found.tools
    assert found.apps == sorted(found.apps)


def test_saved_views_are_each_persons_in_name_order_without_compiling_again(demo):
    me, other = demo["approver"], demo["admin"]
    assert saved_views_for(me) == []
    SavedView.objects.create(user=me, name="zeta", query="status=all")
    SavedView.objects.create(user=me, name="alpha", query="mine=1")
    SavedView.objects.create(user=other, name="theirs", query="q=x")
    with _compiling() as compiling:
        mine, theirs = saved_views_for(me), saved_views_for(other)
    assert compiling.call_count == 0
    assert [(v.name, v.query, v.user_id) for v in mine] == [("alpha", "mine=1", me.pk), ("zeta", "status=all", me.pk)]
    assert [v.name for v in theirs] == ["theirs"]
    assert mine[0] == SavedView.objects.get(user=me, name="alpha") and mine[0].created_at is not None
