"""`manage.py check --deploy --database default` names the demo users whose published passwords still log in,
where adkweb is deployed (agents_app.checks). Before, a database that had `demo_setup --allow-deployed` run
(a local trial, then opened to people) passed the check with `approver/approver-demo` and `admin/admin-demo`
working: nothing said so."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from agents_app.demo.setup import demo_setup

pytestmark = pytest.mark.django_db


def _check_deploy() -> str:
    out = io.StringIO()
    call_command("check", "--deploy", "--database", "default", "--tag", "security", stdout=out, stderr=out)
    return out.getvalue()


def test_deployed_with_the_demo_users_check_deploy_fails_naming_them(settings):
    settings.DEPLOYED = True
    demo_setup()
    with pytest.raises(SystemCheckError) as refused:
        _check_deploy()
    said = str(refused.value)
    assert "agents_app.E001" in said
    assert "Demo users log in with the passwords the README publishes: admin, agentadmin, approver, " in said
    assert "manage.py changepassword" in said

    for user in User.objects.exclude(username="approver"):  # given passwords of their own, or deactivated
        user.set_password("a-password-of-its-own-" + user.username)
        user.save()
    User.objects.filter(username="approver").update(is_active=False)
    assert "agents_app.E001" not in _check_deploy()


def test_the_embedded_demo_and_a_check_without_the_database_say_nothing(settings):
    demo_setup()
    assert "agents_app.E001" not in _check_deploy()  # the embedded demo is the demo
    settings.DEPLOYED = True
    out = io.StringIO()
    call_command("check", "--deploy", "--tag", "security", stdout=out, stderr=out)
    assert "agents_app.E001" not in out.getvalue()  # no --database: no query
