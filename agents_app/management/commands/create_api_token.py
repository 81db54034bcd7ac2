"""Create (or revoke) a user's API token: `manage.py create_api_token <username> [--name ...]`."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents_app.models import ApiToken
from agents_app.tokens import PREFIX_LENGTH, key_hash, token_create, tokens_revoke, user_for_username


class Command(BaseCommand):
    help = "Create an API token for a user and print its key (shown only once); --revoke PREFIX revokes one."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="What the token is for (shown in the admin).")
        parser.add_argument(
            "--revoke", metavar="PREFIX_OR_KEY", help="Revoke the user's token with this prefix or key."
        )
        parser.add_argument("--revoke-all", action="store_true", help="Revoke every active token of the user.")

    def handle(
        self, *args: Any, username: str, name: str, revoke: str | None, revoke_all: bool, **options: Any
    ) -> None:
        try:
            user = user_for_username(username)
        except Exception as exc:
            raise CommandError(f"No user named {username!r}.") from exc
        if revoke or revoke_all:
            tokens = ApiToken.objects.filter(user=user, revoked_at__isnull=True)
            if revoke and len(revoke) > PREFIX_LENGTH:
                tokens = tokens.filter(key_hash=key_hash(revoke))  # a whole key
            elif revoke:
                tokens = tokens.filter(prefix__startswith=revoke)
            count = tokens_revoke(tokens=tokens)
            if not count:
                raise CommandError("No active token matches.")
            self.stderr.write(f"Revoked {count} token(s) of {username}.")
            return
        if not user.is_active:
            raise CommandError(f"User {username!r} is inactive.")
        token, key = token_create(user=user, name=name)
        self.stderr.write(f"Token {token.prefix}… created for {username}. Keep the key secret; it is not stored.")
        self.stdout.write(key)
