"""Make sure a login exists (saying how to use it) and the default rows exist.

The first password never reaches a log: it goes to a 0600 file under var/, and to
the terminal only when stdout is one (`make run` in a shell, not a redirected log).
"""

import os
import secrets
import sys
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from profiles.defaults import defaults_ensure, host_admins_group_ensure, operators_group_ensure

PASSWORD_FILE = "initial-password"  # noqa: S105 - a file name, not a password


def password_file() -> Path:
    return Path(settings.VAR_DIR) / PASSWORD_FILE


def write_secret(path: Path, text: str) -> None:
    """Create `path` readable by its owner only (never world-readable, not even briefly)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text + "\n")


class Command(BaseCommand):
    help = (
        "Ensure an admin login, the operators and host admins groups, the GPU keyword "
        "set and (with FLAMEDECK_LOCAL_HOST) the local host."
    )

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
        user.groups.add(operators_group_ensure(), host_admins_group_ensure())
        write_secret(password_file(), password)
        self.stdout.write(self.style.SUCCESS(f"Created login {username!r}."))
        if sys.stdout.isatty():
            self.stdout.write(f"Password (shown only now): {password}")
        self.stdout.write(
            f"The password is also in {password_file()} (mode 0600): delete that file "
            "once you have logged in, and change the password with manage.py changepassword."
        )
