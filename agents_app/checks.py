"""`manage.py check --deploy --database default`: the demo's logins, whose passwords the README publishes, must
not work where adkweb is deployed. `demo_setup` refuses to run there unless told (`--allow-deployed`, for a
local trial); a database that had it run (or was copied from such a trial) is named here."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks


@checks.register(checks.Tags.security, checks.Tags.database, deploy=True)
def demo_logins_check(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    if not settings.DEPLOYED or not databases:
        return []  # the embedded demo is the demo; without --database no query is made
    from django.contrib.auth.hashers import check_password
    from django.contrib.auth.models import User

    from agents_app.demo.setup import DEMO_USERS

    published = dict((username, password) for username, password, *_ in DEMO_USERS)
    open_logins = [
        user.username
        for user in User.objects.filter(username__in=published, is_active=True).order_by("username")
        if check_password(published[user.username], user.password)  # no setter: a check writes nothing
    ]
    if not open_logins:
        return []
    return [
        checks.Error(
            f"Demo users log in with the passwords the README publishes: {', '.join(open_logins)}.",
            hint="Delete them, or set them passwords of their own, in /admin/ (`manage.py changepassword NAME`): "
            "`demo_setup --allow-deployed` is for a local trial that nobody else can reach.",
            id="agents_app.E001",
        )
    ]
