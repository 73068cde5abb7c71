from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from rest_framework.authtoken.models import Token


class Command(BaseCommand):
    help = "Print an API token for USERNAME (created if needed): `Authorization: Token <key>`."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--rotate", action="store_true", help="Replace an existing token.")

    def handle(self, *args, username: str, rotate: bool, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r}")
        if rotate:
            Token.objects.filter(user=user).delete()
        token, _ = Token.objects.get_or_create(user=user)
        self.stdout.write(token.key)
