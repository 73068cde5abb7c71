from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from runs.tokens import api_token_revoke


class Command(BaseCommand):
    help = "Revoke USERNAME's API tokens (all, or the one whose key starts with --prefix)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--prefix", default="", help="The first characters of the key.")

    def handle(self, *args, username: str, prefix: str, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r}")
        count = api_token_revoke(user=user, prefix=prefix)
        self.stdout.write(f"Revoked {count} token(s) of {username}.")
