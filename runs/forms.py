"""Forms for runs, their processes, and hosts."""

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError

from config.form_fields import StrictIntegerFormField, StrictModelChoiceField
from config.params import PID_MAX, parse_pid

from .models import Host, Run
from .permissions import OPERATOR_HOST_FIELDS, can_administer_hosts


class RunForm(forms.ModelForm):
    schedule_every_min = StrictIntegerFormField(
        min_value=0,
        max_value=2**31 - 1,
        initial=0,
        label="Capture every N minutes while running (0 = off)",
    )
    tags_text = forms.CharField(
        label="Tags", required=False, help_text="Comma- or space-separated, e.g. baseline bs64"
    )

    class Meta:
        model = Run
        fields = [
            "name",
            "description",
            "status",
            "started_at",
            "ended_at",
            "schedule_every_min",
            "library_paths",
            "step_threads",
        ]
        widgets = {
            "description": forms.Textarea(attrs={"rows": 3}),
            "library_paths": forms.Textarea(attrs={"rows": 2}),
            "started_at": forms.DateTimeInput(attrs={"type": "datetime-local"}),
            "ended_at": forms.DateTimeInput(attrs={"type": "datetime-local"}),
        }
        labels = {"schedule_every_min": "Capture every N minutes while running (0 = off)"}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["tags_text"].initial = " ".join(t.name for t in self.instance.tags.all())


class RunProcessForm(forms.Form):
    host = StrictModelChoiceField(queryset=Host.objects.all())
    pid = StrictIntegerFormField(min_value=1, max_value=PID_MAX)
    role = forms.CharField(max_length=100, required=False, help_text="e.g. target-0, rank 3")

    def clean_pid(self) -> int:
        try:
            return parse_pid(self.cleaned_data["pid"])
        except ValidationError as exc:  # a {field: message} error; the form wants a message
            raise ValidationError(exc.message_dict["pid"]) from None


class AttachTreeForm(forms.Form):
    """Processes of one host (a launcher's tree) to attach to a run, new or existing."""

    pids = forms.CharField(help_text="PIDs separated by commas or spaces")
    run = StrictModelChoiceField(queryset=Run.objects.all(), required=False)
    new_run = forms.CharField(max_length=200, required=False)

    def clean_pids(self) -> list[int]:
        words = self.cleaned_data["pids"].replace(",", " ").split()
        if not words or len(words) > 512:
            raise ValidationError("pick between 1 and 512 processes")
        try:
            return list(dict.fromkeys(parse_pid(word) for word in words))
        except ValidationError as exc:
            raise ValidationError(exc.message_dict["pid"]) from None

    def clean(self) -> dict:
        data = super().clean()
        if not data.get("run") and not (data.get("new_run") or "").strip():
            raise ValidationError("pick a run or name a new one")
        data["new_run"] = (data.get("new_run") or "").strip()
        return data


class HostForm(forms.ModelForm):
    """A host as `user` may edit it: operators its notes, host admins the rest; a
    local host's exec prefix and py-spy path nobody (they are set by bootstrap)."""

    class Meta:
        model = Host
        fields = Host.EDITABLE_FIELDS
        widgets = {"notes": forms.Textarea(attrs={"rows": 2})}

    port = StrictIntegerFormField(min_value=1, max_value=65535, required=False)

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        if not can_administer_hosts(user):
            for name, field in self.fields.items():
                field.disabled = name not in OPERATOR_HOST_FIELDS
        if self.instance.pk and self.instance.is_local:
            for name in ("exec_prefix", "py_spy"):
                self.fields[name].disabled = True
                self.fields[name].help_text = "Fixed for the local host (set by bootstrap)."
        if not settings.FLAMEDECK_LOCAL_HOST:
            self.fields["transport"].choices = [
                c for c in self.fields["transport"].choices if c[0] != Host.Transport.LOCAL
            ]
