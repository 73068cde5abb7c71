"""Two trust levels: operators launch, host admins decide what runs where.

Every path that writes a host (pages, API, admin) goes through
`runs.services.host_save`, which checks the permission, applies the command
builder's own validation and records each change of a command field.
"""

import pytest
from django.test import override_settings
from django.urls import reverse

from profiles.models import Capture
from runs.models import Host, HostChange
from runs.permissions import HIDDEN_COMMAND

pytestmark = pytest.mark.django_db

SSH_HOST = {"name": "gpu-1", "transport": "ssh", "address": "gpu-1.lan", "py_spy": "py-spy"}
UNUSABLE = [
    ("address", "127.0.0.1;touch${IFS}x"),
    ("address", "-oProxyCommand=x"),
    ("username", "a$(b)"),
    ("exec_prefix", "'unbalanced"),
    ("port", 70000),
]


def _ssh_host(**fields) -> Host:
    return Host.objects.create(**{**SSH_HOST, **fields})


def test_an_operator_cannot_create_a_host_on_the_page_or_the_api(owner_client):
    assert owner_client.get(reverse("runs:host_create")).status_code == 403
    assert owner_client.post(reverse("runs:host_create"), SSH_HOST).status_code == 403
    assert owner_client.post("/api/hosts/", SSH_HOST).status_code == 403
    assert not Host.objects.filter(name="gpu-1").exists()


@pytest.mark.parametrize(
    "field,value",
    [
        ("exec_prefix", "nsenter -t 1 -a --"),
        ("address", "evil.lan"),
        ("transport", "local"),
        ("py_spy", "/tmp/evil"),
        ("sudo", True),
        ("port", 2222),
        ("username", "root"),
        ("name", "renamed"),
    ],
)
def test_an_operator_cannot_change_how_a_host_is_reached(owner_client, field, value):
    host = _ssh_host()
    response = owner_client.patch(
        f"/api/hosts/{host.pk}/", {field: value}, content_type="application/json"
    )
    assert response.status_code == 403
    form = {**SSH_HOST, "notes": "", field: value}
    owner_client.post(reverse("runs:host_edit", args=[host.pk]), form)
    fresh = Host.objects.get(pk=host.pk)
    assert getattr(fresh, field) == getattr(host, field)
    assert list(HostChange.objects.filter(host=host).values_list("via", flat=True)) == ["shell"]


def test_an_operator_edits_a_hosts_notes(owner_client):
    host = _ssh_host()
    form = {**SSH_HOST, "notes": "rack 4", "exec_prefix": "docker exec -i x"}
    assert owner_client.post(reverse("runs:host_edit", args=[host.pk]), form).status_code == 302
    fresh = Host.objects.get(pk=host.pk)
    assert (fresh.notes, fresh.exec_prefix) == ("rack 4", "")  # the prefix field is disabled


def test_a_viewer_edits_nothing_and_a_superuser_everything(teammate_client, admin_client):
    host = _ssh_host()
    url = f"/api/hosts/{host.pk}/"
    body = {"exec_prefix": "docker exec -i t"}
    assert teammate_client.patch(url, body, content_type="application/json").status_code == 403
    assert admin_client.patch(url, body, content_type="application/json").status_code == 200
    assert Host.objects.get(pk=host.pk).exec_prefix == "docker exec -i t"


@pytest.mark.parametrize("field,value", UNUSABLE)
def test_a_host_the_command_builder_cannot_use_is_not_saved(host_admin_client, field, value):
    api = host_admin_client.post(
        "/api/hosts/", {**SSH_HOST, field: value}, content_type="application/json"
    )
    assert api.status_code == 400 and field in api.json()
    page = host_admin_client.post(reverse("runs:host_create"), {**SSH_HOST, field: value})
    assert page.status_code == 200
    assert page.context["form"].errors.get(field), page.context["form"].errors
    assert not Host.objects.filter(name="gpu-1").exists()


def test_every_change_of_a_command_field_is_recorded_and_shown(host_admin_client, host_admin):
    host_admin_client.post(reverse("runs:host_create"), SSH_HOST)
    host = Host.objects.get(name="gpu-1")
    host_admin_client.patch(
        f"/api/hosts/{host.pk}/",
        {"exec_prefix": "pct exec 200 --", "notes": "n"},
        content_type="application/json",
    )
    created, changed = reversed(HostChange.objects.filter(host=host))
    assert created.changes["address"] == [None, "gpu-1.lan"] and created.via == "web"
    assert changed.changes == {"exec_prefix": ["", "pct exec 200 --"]}
    assert (changed.changed_by, changed.via) == (host_admin, "api")
    page = host_admin_client.get(host.get_absolute_url()).content.decode()
    assert "pct exec 200 --" in page and "hostadmin" in page and "exec_prefix" in page


def test_the_local_hosts_wrapper_and_py_spy_are_not_editable_from_the_web(host_admin_client):
    local = Host.objects.get(name="local")
    for field, value in [("exec_prefix", "sh -c id --"), ("py_spy", "/tmp/evil")]:
        response = host_admin_client.patch(
            f"/api/hosts/{local.pk}/", {field: value}, content_type="application/json"
        )
        # The body is well formed; the local host as stored refuses it (409, issue 49).
        assert response.status_code == 409 and response.json()["detail"].startswith(field)
        form = {"name": "local", "transport": "local", "py_spy": local.py_spy, field: value}
        host_admin_client.post(reverse("runs:host_edit", args=[local.pk]), form)
    fresh = Host.objects.get(pk=local.pk)
    assert (fresh.exec_prefix, fresh.py_spy) == (local.exec_prefix, local.py_spy)


def test_an_ssh_host_cannot_become_a_local_one_with_its_own_wrapper(host_admin_client):
    host = _ssh_host(exec_prefix="docker exec -i t")
    response = host_admin_client.patch(
        f"/api/hosts/{host.pk}/", {"transport": "local"}, content_type="application/json"
    )
    assert response.status_code == 409 and "exec_prefix" in response.json()["detail"]
    said = {"transport": "local", "exec_prefix": "docker exec -i t"}  # the body's own rule
    response = host_admin_client.patch(f"/api/hosts/{host.pk}/", said, "application/json")
    assert response.status_code == 400 and "exec_prefix" in response.json()


@override_settings(FLAMEDECK_LOCAL_HOST=False)
def test_with_local_hosts_off_none_is_created_checked_or_captured(host_admin_client, owner):
    from runs.services import local_host_ensure

    assert local_host_ensure() is None
    body = {"name": "here", "transport": "local"}
    response = host_admin_client.post("/api/hosts/", body, content_type="application/json")
    # A well-formed host this server's configuration refuses: 409 (issue 49).
    assert response.status_code == 409 and "FLAMEDECK_LOCAL_HOST" in str(response.json())
    local = Host.objects.get(name="local")  # left over from before the switch
    capture = host_admin_client.post(
        "/api/captures/", {"host": "local", "pid": 5}, content_type="application/json"
    )
    assert capture.status_code == 400 and "FLAMEDECK_LOCAL_HOST" in str(capture.json())
    check = host_admin_client.post(f"/api/hosts/{local.pk}/check/")
    assert check.status_code == 400
    assert not Capture.objects.exists()


def test_the_servers_own_command_lines_are_for_host_admins_only(
    client, owner, teammate, host_admin
):
    local = Host.objects.get(name="local")
    secret = "python train.py --token=s3cr3t"
    local.last_check = {"processes": [{"pid": 9, "user": "root", "command": secret}]}
    local.save()
    for user in (owner, teammate):
        client.force_login(user)
        page = client.get(local.get_absolute_url()).content.decode()
        assert secret not in page and HIDDEN_COMMAND in page
        assert secret not in client.get(f"/api/hosts/{local.pk}/").content.decode()
        assert secret not in client.get("/api/hosts/").content.decode()
    owner.is_staff = True
    owner.save()
    client.force_login(owner)
    admin_page = client.get(reverse("admin:runs_host_change", args=[local.pk]))
    assert admin_page.status_code == 200 and secret not in admin_page.content.decode()
    client.force_login(host_admin)
    assert secret in client.get(local.get_absolute_url()).content.decode()
    assert secret in client.get(f"/api/hosts/{local.pk}/").content.decode()


def test_an_ssh_hosts_command_lines_stay_visible_to_viewers(teammate_client):
    host = _ssh_host(last_check={"processes": [{"pid": 9, "user": "u", "command": "python x.py"}]})
    assert "python x.py" in teammate_client.get(host.get_absolute_url()).content.decode()


def test_the_admin_applies_the_same_rules(client, owner, host_admin):
    owner.is_staff = True
    owner.save()
    client.force_login(owner)
    assert client.get(reverse("admin:runs_host_add")).status_code == 403
    host = _ssh_host()
    form = {**SSH_HOST, "exec_prefix": "sh -c id --", "notes": "x", "port": ""}
    client.post(reverse("admin:runs_host_change", args=[host.pk]), form)
    assert Host.objects.get(pk=host.pk).exec_prefix == ""
    host_admin.is_staff = True
    host_admin.save()
    client.force_login(host_admin)
    inline = {
        "changes-TOTAL_FORMS": "0",
        "changes-INITIAL_FORMS": "0",
        "changes-MIN_NUM_FORMS": "0",
        "changes-MAX_NUM_FORMS": "1000",
    }
    response = client.post(
        reverse("admin:runs_host_change", args=[host.pk]),
        {**form, **inline, "exec_prefix": "docker exec -i t", "sudo": ""},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Host.objects.get(pk=host.pk).exec_prefix == "docker exec -i t"
    assert HostChange.objects.filter(host=host).first().via == "admin"


def test_a_host_saved_before_validation_existed_fails_its_check_and_captures_clearly(
    owner_client, owner
):
    from profiles.captures import pipeline, services

    host = _ssh_host()
    Host.objects.filter(pk=host.pk).update(address="127.0.0.1;touch${IFS}x")  # legacy row
    response = owner_client.post(f"/api/hosts/{host.pk}/check/")
    assert response.status_code == 200
    assert "address" in response.json()["error"] and response.json()["ok"] is False
    capture = services.capture_create(
        user=owner, host=Host.objects.get(pk=host.pk), pid=5, enqueue=False
    )
    # Failed when asked for, with the field named; a worker would refuse it too.
    assert (capture.status, capture.error_cause) == (Capture.Status.FAILED, "host_config")
    assert "address" in capture.error and "Edit page" in capture.error
    assert pipeline.capture_execute(capture_id=capture.pk) == "skipped"
