"""Make sure a login exists (printing how to use it) and the default rows exist."""

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from profiles.defaults import defaults_ensure, operators_group_ensure


class Command(BaseCommand):
    help = "Ensure an admin login, the operators group, the GPU keyword set and the local host."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")

    def handle(self, *args, username: str, **options):
        defaults_ensure()
        User = get_user_model()
        if User.objects.filter(is_superuser=True).exists():
            names = ", ".join(
                User.objects.filter(is_superuser=True).values_list("username", flat=True)[:5]
            )
            self.stdout.write(
                f"Log in as {names}. Forgot the password? "
                f".venv/bin/python manage.py changepassword {names.split(', ')[0]}"
            )
            return
        password = secrets.token_urlsafe(12)
        user = User.objects.create_superuser(username=username, email="", password=password)
        user.groups.add(operators_group_ensure())
        self.stdout.write(
            self.style.SUCCESS(f"Created login {username!r} with password: {password}")
        )
        self.stdout.write("It is shown only now; change it with manage.py changepassword.")
