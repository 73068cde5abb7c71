from django.contrib import admin

from .models import Host, Run, RunProcess, Tag


@admin.register(Tag)
class TagAdmin(admin.ModelAdmin):
    search_fields = ["name"]


@admin.register(Host)
class HostAdmin(admin.ModelAdmin):
    list_display = ["name", "transport", "address", "port", "username", "exec_prefix", "sudo"]
    list_filter = ["transport", "sudo"]
    search_fields = ["name", "address", "notes"]
    readonly_fields = ["last_check", "last_checked_at", "created_at", "updated_at"]


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
