from django.contrib import admin

from profiles.storage.artifacts import ARTIFACT_FIELDS

from .models import Capture, CaptureGroup, Comment, Keyword, KeywordSet


class KeywordInline(admin.TabularInline):
    model = Keyword
    extra = 1


@admin.register(KeywordSet)
class KeywordSetAdmin(admin.ModelAdmin):
    list_display = ["name", "is_default", "created_at"]
    inlines = [KeywordInline]


class CommentInline(admin.TabularInline):
    model = Comment
    extra = 0
    readonly_fields = ["author", "created_at"]


@admin.register(Comment)
class CommentAdmin(admin.ModelAdmin):
    """Any comment, to read or remove (the capture page lets host admins and staff
    remove one too)."""

    list_display = ["id", "capture", "author", "created_at", "short_body"]
    list_filter = ["created_at"]
    search_fields = ["body", "author__username", "capture__id"]
    raw_id_fields = ["capture", "author"]
    readonly_fields = ["created_at"]

    @admin.display(description="Comment")
    def short_body(self, comment: Comment) -> str:
        return comment.body[:80]


@admin.register(Capture)
class CaptureAdmin(admin.ModelAdmin):
    list_display = ["id", "kind", "status", "host", "pid", "run", "duration", "rate", "queued_at"]
    list_filter = ["status", "kind", "host", "scheduled"]
    search_fields = ["id", "error", "note", "original_name"]
    raw_id_fields = ["run", "process", "group"]
    readonly_fields = [
        "queued_at",
        "started_at",
        "finished_at",
        "heartbeat_at",
        "worker",
        "progress",
        "stats",
        "error_cause",
        "raw_size",
        "raw_pruned_at",
        "stored_files",
    ]
    # Artifacts may live in the database or S3, which have no URL to link: names only.
    exclude = ARTIFACT_FIELDS
    date_hierarchy = "queued_at"
    inlines = [CommentInline]

    @admin.display(description="Stored files")
    def stored_files(self, capture: Capture) -> str:
        return ", ".join(getattr(capture, f).name for f in ARTIFACT_FIELDS if getattr(capture, f))


@admin.register(CaptureGroup)
class CaptureGroupAdmin(admin.ModelAdmin):
    list_display = ["id", "run", "scheduled", "created_at"]
    raw_id_fields = ["run"]


from profiles.watches import admin as watch_admin  # noqa: E402, F401 — the watches register their own admin
