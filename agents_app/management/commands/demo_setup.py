"""`manage.py demo_setup`: the embedded demo's users, groups, agents and policies; with `--conversations`
(`make run`) its first conversations and tickets too. For the demo only: its users have published
passwords, so it refuses to run outside the embedded demo unless told (the conversations: always)."""

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = (
        "FOR THE DEMO ONLY: create or refresh the demo users (with their published passwords), groups, agents "
        "and policies (idempotent). A real deployment runs `setup_roles` and `createsuperuser` instead."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--allow-deployed",
            action="store_true",
            help="Run even outside the embedded demo (DATABASE_URL or REDIS_URL set): a local trial of "
            "services mode, never a server people can reach.",
        )
        parser.add_argument(
            "--conversations",
            action="store_true",
            help="Also make the requester's demo conversations (`make run`): tickets waiting in the inbox, one "
            "approved, one rejected, made by the agents' real turns with the offline demo model. Made once "
            "(a second run makes none). Embedded demo only.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from agents_app.demo.setup import DEMO_USERS, demo_setup
        from agents_app.demo_conversations import demo_conversations

        if settings.DEPLOYED and options["conversations"]:
            raise CommandError(
                "demo_setup --conversations is for the embedded demo only (`make run`): its conversations run "
                "the agents' turns in this process. Nothing was changed."
            )
        if settings.DEPLOYED and not options["allow_deployed"]:
            raise CommandError(
                "demo_setup is for the demo only: it creates users whose passwords are published in the README. "
                "Outside the embedded demo, run `manage.py setup_roles` and `manage.py createsuperuser` instead "
                "(or pass --allow-deployed for a local trial that nobody else can reach)."
            )
        demo_setup()
        logins = ", ".join(f"{u}/{p}" for u, p, *_ in DEMO_USERS)
        self.stdout.write(self.style.SUCCESS(f"Demo ready. Logins: {logins}"))
        self.stdout.write(self.style.WARNING("These are demo users with published passwords: demo only."))
        if options["conversations"]:
            made = demo_conversations()
            said = f"{made} made (tickets waiting in the approvers' inbox)" if made else "already there, none made"
            self.stdout.write(f"Demo conversations: {said}.")
