"""The base layout loads for a logged-in user and nothing is served to anyone else."""

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_the_base_layout_loads_with_navigation_and_bundled_assets(teammate_client):
    response = teammate_client.get(reverse("runs:run_list"))
    assert response.status_code == 200
    html = response.content.decode()
    for label in ("Runs", "Hosts", "Captures", "Log out", "teammate"):
        assert label in html
    # django-compressor bundles the page's CSS and JS into cached files.
    assert "/static/CACHE/css/" in html
    assert "/static/CACHE/js/" in html


def test_the_admin_link_shows_only_for_staff(teammate_client, admin_client):
    assert (
        reverse("admin:index") not in teammate_client.get(reverse("runs:run_list")).content.decode()
    )
    assert reverse("admin:index") in admin_client.get(reverse("runs:run_list")).content.decode()


@pytest.mark.parametrize("name", ["runs:run_list", "runs:host_list", "profiles:capture_list"])
def test_pages_redirect_anonymous_visitors_to_the_login_page(client, name):
    response = client.get(reverse(name))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_the_login_page_logs_a_user_in(client, teammate):
    page = client.get(reverse("login"))
    assert page.status_code == 200
    response = client.post(reverse("login"), {"username": "teammate", "password": "teammate-pass"})
    assert response.status_code == 302
    assert client.get(reverse("runs:run_list")).status_code == 200


def test_the_defaults_exist_after_migrate():
    from django.contrib.auth.models import Group

    from profiles.models import KeywordSet
    from runs.models import Host

    assert Host.objects.get(name="local").transport == "local"
    default = KeywordSet.objects.get(is_default=True)
    assert default.keywords.filter(keyword="cuLaunchKernel", category="launch").exists()
    perms = set(Group.objects.get(name="operators").permissions.values_list("codename", flat=True))
    assert {"launch_capture", "change_host"} <= perms
    assert not {"add_host", "administer_hosts"} & perms
    admins = Group.objects.get(name="host admins").permissions.values_list("codename", flat=True)
    assert {"administer_hosts", "add_host", "change_host"} <= set(admins)
