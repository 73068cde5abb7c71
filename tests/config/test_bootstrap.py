"""`manage.py bootstrap` (run by `make run`): the first password is never printed
into a log; it goes to a 0600 file, and to the terminal only when stdout is one."""

import io
import stat

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from config.management.commands.bootstrap import password_file

pytestmark = pytest.mark.django_db


def test_the_first_password_goes_to_a_0600_file_not_to_redirected_output(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    out = io.StringIO()
    call_command("bootstrap", stdout=out)
    path = password_file()
    password = path.read_text().strip()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert password and password not in out.getvalue()
    assert str(path) in out.getvalue()
    admin = get_user_model().objects.get(username="admin")
    assert admin.check_password(password) and admin.is_superuser
    groups = set(admin.groups.values_list("name", flat=True))
    assert groups == {"operators", "host admins"}


def test_a_second_bootstrap_prints_no_password(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    call_command("bootstrap", stdout=io.StringIO())
    password = password_file().read_text().strip()
    out = io.StringIO()
    call_command("bootstrap", stdout=out)
    assert password not in out.getvalue() and "Log in as admin" in out.getvalue()
