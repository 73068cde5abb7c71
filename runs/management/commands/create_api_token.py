from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from runs.tokens import api_token_create, api_token_revoke


class Command(BaseCommand):
    help = (
        "Create an API token for USERNAME and print its key once "
        "(`Authorization: Token <key>`); only a hash is stored."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="What the token is for.")
        parser.add_argument(
            "--days",
            type=int,
            default=None,
            help="Days until it expires (default FLAMEDECK_TOKEN_DAYS; 0 = never).",
        )
        parser.add_argument(
            "--rotate", action="store_true", help="Revoke the user's other tokens first."
        )

    def handle(self, *args, username: str, name: str, days: int | None, rotate: bool, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r}")
        days = settings.FLAMEDECK_TOKEN_DAYS if days is None else days
        if days < 0:
            raise CommandError("--days must be 0 (never expires) or more")
        if rotate:
            api_token_revoke(user=user)
        token, key = api_token_create(user=user, name=name, days=days)
        self.stdout.write(key)
        until = f"until {token.expires_at:%Y-%m-%d %H:%M} UTC" if token.expires_at else "forever"
        self.stderr.write(
            f"Token {token.prefix}… for {username}, valid {until}. "
            "Shown only now; revoke it with manage.py revoke_api_token."
        )
