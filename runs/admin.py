from django.contrib import admin
from django.utils import timezone

from . import services
from .audit import recording_as
from .models import ApiToken, Host, HostChange, Run, RunProcess, Tag
from .permissions import OPERATOR_HOST_FIELDS, can_administer_hosts


@admin.register(Tag)
class TagAdmin(admin.ModelAdmin):
    search_fields = ["name"]


class HostChangeInline(admin.TabularInline):
    model = HostChange
    extra = 0
    can_delete = False
    fields = readonly_fields = ["changed_at", "changed_by", "via", "changes"]

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(HostChange)
class HostChangeAdmin(admin.ModelAdmin):
    """The whole change log, deleted hosts' included; nobody edits or deletes it."""

    list_display = ["changed_at", "host_name", "host", "changed_by", "via"]
    list_filter = ["via"]
    search_fields = ["host_name"]
    fields = readonly_fields = ["changed_at", "host_name", "host", "changed_by", "via", "changes"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Host)
class HostAdmin(admin.ModelAdmin):
    """Same rules as the pages and the API (runs.services.host_save): only host admins
    create hosts or change how they are reached; a local host's wrapper is fixed."""

    list_display = ["name", "transport", "address", "port", "username", "exec_prefix", "sudo"]
    list_filter = ["transport", "sudo"]
    search_fields = ["name", "address", "notes"]
    fields = [*Host.EDITABLE_FIELDS, "last_check", "last_checked_at", "created_at", "updated_at"]
    inlines = [HostChangeInline]

    def get_fields(self, request, obj=None) -> list[str]:
        # The last check holds the server's own command lines for a local host.
        if can_administer_hosts(request.user):
            return self.fields
        return [f for f in self.fields if f != "last_check"]

    def get_readonly_fields(self, request, obj=None) -> list[str]:
        fixed = ["last_check", "last_checked_at", "created_at", "updated_at"]
        if not can_administer_hosts(request.user):
            fixed += [f for f in Host.EDITABLE_FIELDS if f not in OPERATOR_HOST_FIELDS]
        elif obj is not None and obj.is_local:
            fixed += ["exec_prefix", "py_spy"]
        return fixed

    def has_add_permission(self, request) -> bool:
        return can_administer_hosts(request.user)

    def has_delete_permission(self, request, obj=None) -> bool:
        return can_administer_hosts(request.user) and super().has_delete_permission(request, obj)

    def save_model(self, request, obj: Host, form, change: bool) -> None:
        services.host_save(host=obj, user=request.user, via="admin")

    def delete_model(self, request, obj: Host) -> None:
        with recording_as(request.user, "admin"):
            super().delete_model(request, obj)

    def delete_queryset(self, request, queryset) -> None:
        with recording_as(request.user, "admin"):
            super().delete_queryset(request, queryset)


class RunProcessInline(admin.TabularInline):
    model = RunProcess
    extra = 0
    autocomplete_fields = ["host"]


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["name", "status", "started_at", "ended_at", "created_by", "created_at"]
    list_filter = ["status", "tags"]
    search_fields = ["name", "description"]
    filter_horizontal = ["tags"]
    inlines = [RunProcessInline]
    date_hierarchy = "created_at"


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are listed and revoked here, never shown: only a hash is stored, and new
    ones come from `manage.py create_api_token`."""

    list_display = ["prefix", "user", "name", "created_at", "expires_at", "revoked_at"]
    list_filter = ["revoked_at"]
    fields = readonly_fields = [
        "prefix",
        "user",
        "name",
        "created_at",
        "expires_at",
        "revoked_at",
        "last_used_at",
    ]
    actions = ["revoke"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset) -> None:
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {count} token(s).")


def _hide_plain_tokens() -> None:
    # DRF's authtoken app stays installed only so a migration can hash its old keys;
    # its admin would show keys in clear.
    from rest_framework.authtoken.models import TokenProxy

    if admin.site.is_registered(TokenProxy):
        admin.site.unregister(TokenProxy)


_hide_plain_tokens()
