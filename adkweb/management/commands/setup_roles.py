"""`manage.py setup_roles`: the role groups and their permissions (no users; idempotent)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from adkweb.roles import ROLE_PERMISSIONS, roles_setup


class Command(BaseCommand):
    help = "Create or refresh the role groups (approvers, agent admins, staff observers) with their permissions."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            roles_setup()
        except LookupError as exc:
            raise CommandError(str(exc)) from exc
        for name, perms in ROLE_PERMISSIONS.items():
            self.stdout.write(f"{name}: {', '.join(perms)}")
        self.stdout.write(self.style.SUCCESS("Roles ready. Add people to these groups in the Django admin."))
