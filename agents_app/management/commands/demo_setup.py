from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create or refresh the demo users, groups and agents (idempotent)."

    def handle(self, *args, **options) -> None:
        from agents_app.demo.setup import DEMO_USERS, demo_setup

        demo_setup()
        logins = ", ".join(f"{u}/{p}" for u, p, *_ in DEMO_USERS)
        self.stdout.write(self.style.SUCCESS(f"Demo ready. Logins: {logins}"))
