"""Admin for the regression watches. Notification targets are for host admins only,
and their URL is write-only: the form never shows the stored one back."""

from django import forms
from django.contrib import admin

from profiles.watches import notify
from profiles.watches.models import Alert, Delivery, NotifyTarget, Watch
from runs.permissions import can_administer_hosts


class NotifyTargetForm(forms.ModelForm):
    url = forms.CharField(
        widget=forms.PasswordInput(render_value=False),
        required=False,
        help_text="An Apprise URL. Never shown again; leave empty to keep the stored one.",
    )

    class Meta:
        model = NotifyTarget
        fields = ["name", "url", "description"]

    def clean_url(self) -> str:
        url = self.cleaned_data["url"].strip()
        if not url and self.instance.pk:
            return self.instance.url
        problem = notify.url_problem(url)
        if problem:
            raise forms.ValidationError(problem)
        return url


@admin.register(NotifyTarget)
class NotifyTargetAdmin(admin.ModelAdmin):
    form = NotifyTargetForm
    list_display = ["name", "masked_url", "description", "created_at"]

    def _host_admin(self, request, obj=None) -> bool:
        return can_administer_hosts(request.user)

    has_module_permission = has_view_permission = _host_admin
    has_add_permission = has_change_permission = has_delete_permission = _host_admin

    def save_model(self, request, obj, form, change) -> None:
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)


@admin.register(Watch)
class WatchAdmin(admin.ModelAdmin):
    list_display = ["id", "run", "role", "baseline", "min_effect_points", "snoozed_until"]
    raw_id_fields = ["run", "process", "baseline"]
    readonly_fields = ["shifts", "created_by", "created_at"]


@admin.register(Alert)
class AlertAdmin(admin.ModelAdmin):
    list_display = ["id", "watch", "label", "direction", "source", "status", "opened_at"]
    list_filter = ["status", "source"]
    raw_id_fields = ["watch", "judgement"]


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ["id", "target_name", "status", "attempts", "created_at", "sent_at"]
    list_filter = ["status"]
    raw_id_fields = ["judgement", "target"]
