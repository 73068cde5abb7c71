"""The host change log (runs.audit): every path that changes how a host is reached
leaves a row saying who and how, and deleting a host keeps its history."""

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse

from runs import services
from runs.models import Host, HostChange

pytestmark = pytest.mark.django_db

SSH_HOST = {"name": "gpu-1", "transport": "ssh", "address": "gpu-1.lan", "py_spy": "py-spy"}


def _vias(host_name: str) -> list[str]:
    return list(HostChange.objects.filter(host_name=host_name).values_list("via", flat=True))


def test_deleting_a_host_keeps_its_history_and_records_the_deletion(client, host_admin):
    host_admin.is_staff = True
    host_admin.save()
    client.force_login(host_admin)
    client.post("/api/hosts/", SSH_HOST, content_type="application/json")
    host = Host.objects.get(name="gpu-1")
    client.patch(f"/api/hosts/{host.pk}/", {"exec_prefix": "pct exec 200 --"},
                 content_type="application/json")  # fmt: skip
    response = client.post(reverse("admin:runs_host_delete", args=[host.pk]), {"post": "yes"})
    assert response.status_code == 302 and not Host.objects.filter(pk=host.pk).exists()
    deleted, changed, created = HostChange.objects.filter(host_name="gpu-1")
    assert (created.via, changed.via, deleted.via) == ("api", "api", "admin")
    assert {created.host, changed.host, deleted.host} == {None}
    assert changed.changes == {"exec_prefix": ["", "pct exec 200 --"]}
    assert deleted.changed_by == host_admin
    assert deleted.changes["exec_prefix"] == ["pct exec 200 --", None]
    listing = client.get(reverse("admin:runs_hostchange_changelist"))
    assert listing.status_code == 200 and "gpu-1" in listing.content.decode()


def test_saves_from_a_shell_are_recorded_as_shell_and_checks_are_not_changes():
    host = Host.objects.create(**SSH_HOST)  # a shell or a management command
    host.exec_prefix = "docker exec -i t"
    services.host_save(host=host, user=None)
    host.last_check = {"ssh_ok": True}
    host.save(update_fields=["last_check"])
    host.notes = "rack 4"
    host.save()
    assert _vias("gpu-1") == ["shell", "shell"]
    newest = HostChange.objects.filter(host=host).first()
    assert newest.changes == {"exec_prefix": ["", "docker exec -i t"]}
    assert newest.changed_by is None


def test_the_web_page_records_web_and_the_admin_records_admin(client, host_admin):
    host_admin.is_staff = True
    host_admin.save()
    client.force_login(host_admin)
    client.post(reverse("runs:host_create"), SSH_HOST)
    host = Host.objects.get(name="gpu-1")
    inline = {f"changes-{k}": v for k, v in
              {"TOTAL_FORMS": "0", "INITIAL_FORMS": "0", "MIN_NUM_FORMS": "0",
               "MAX_NUM_FORMS": "1000"}.items()}  # fmt: skip
    form = {**SSH_HOST, **inline, "port": "2222", "notes": ""}
    assert client.post(reverse("admin:runs_host_change", args=[host.pk]), form).status_code == 302
    assert _vias("gpu-1") == ["admin", "web"]
    assert {c.changed_by for c in HostChange.objects.filter(host=host)} == {host_admin}


def test_bootstrap_records_the_creation_of_the_local_host():
    Host.objects.filter(name="local").delete()
    HostChange.objects.all().delete()
    call_command("bootstrap", stdout=None)
    (created,) = HostChange.objects.filter(host__name="local")
    assert (created.via, created.changed_by, created.host_name) == ("bootstrap", None, "local")
    assert created.changes["transport"] == [None, "local"]


def test_bootstrap_resets_a_tampered_local_host_and_records_it(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    local = Host.objects.get(name="local")
    fixed = local.py_spy
    Host.objects.filter(pk=local.pk).update(exec_prefix="sh -c id --", py_spy="/tmp/evil")
    recorded = HostChange.objects.filter(host=local).count()  # its creation
    call_command("bootstrap", stdout=None)
    local.refresh_from_db()
    assert (local.exec_prefix, local.py_spy) == ("", fixed)
    assert HostChange.objects.filter(host=local).count() == recorded + 1
    reset = HostChange.objects.filter(host=local).first()
    assert reset.changes == {"exec_prefix": ["sh -c id --", ""], "py_spy": ["/tmp/evil", fixed]}
    assert (reset.via, reset.changed_by) == ("bootstrap", None)
    call_command("bootstrap", stdout=None)
    assert HostChange.objects.filter(host=local).count() == recorded + 1  # nothing to reset


def test_a_leftover_local_host_is_reset_even_with_local_hosts_off(settings):
    settings.FLAMEDECK_LOCAL_HOST = False
    Host.objects.filter(name="local").update(exec_prefix="sh -c id --")
    assert services.local_host_ensure() is None
    assert Host.objects.get(name="local").exec_prefix == ""


def test_the_operators_permission_says_what_it_allows():
    perm = Permission.objects.get(codename="launch_capture")
    assert "edit hosts" not in perm.name and "host notes" in perm.name


@pytest.mark.django_db(transaction=True)
def test_the_migration_names_old_changes_and_resets_tampered_local_hosts(back_to_latest):
    before, after = (
        ("runs", "0003_security_host_admins_tokens"),
        [("runs", "0004_audit_keeps_history_local_host_reset")],
    )
    executor = MigrationExecutor(connection)
    executor.migrate([before])
    old = executor.loader.project_state([before]).apps
    OldHost, OldChange = old.get_model("runs", "Host"), old.get_model("runs", "HostChange")
    tampered = OldHost.objects.create(
        name="old-local", transport="local", exec_prefix="sh -c id --", py_spy="/tmp/evil"
    )
    ssh = OldHost.objects.create(name="gpu", address="gpu.lan", exec_prefix="docker exec -i t")
    OldChange.objects.create(host=ssh, changes={"address": [None, "gpu.lan"]})
    executor = MigrationExecutor(connection)
    executor.migrate(after)
    fixed = Host.objects.get(name="local").py_spy
    reset = Host.objects.get(pk=tampered.pk)
    assert (reset.exec_prefix, reset.py_spy) == ("", fixed)
    (record,) = HostChange.objects.filter(host=reset)
    assert record.via == "bootstrap" and record.changes["exec_prefix"] == ["sh -c id --", ""]
    assert Host.objects.get(pk=ssh.pk).exec_prefix == "docker exec -i t"
    assert HostChange.objects.get(host_id=ssh.pk).host_name == "gpu"
