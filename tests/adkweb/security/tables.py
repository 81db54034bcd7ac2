"""Every URL of the project, as rows: who gets what for each method."""

from __future__ import annotations

from tests.adkweb.security.sweep import Target, World
from tests.adkweb.security.tables_api import api_targets
from tests.adkweb.security.tables_notifications import notification_targets
from tests.adkweb.security.tables_pages import page_targets
from tests.adkweb.security.tables_policies import policy_targets


def targets(w: World) -> list[Target]:
    return [*api_targets(w), *page_targets(w), *notification_targets(w), *policy_targets(w)]
