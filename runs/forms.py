"""Forms for runs, their processes, and hosts."""

from django import forms

from .models import Host, Run


class RunForm(forms.ModelForm):
    tags_text = forms.CharField(
        label="Tags", required=False, help_text="Comma- or space-separated, e.g. baseline bs64"
    )

    class Meta:
        model = Run
        fields = ["name", "description", "status", "started_at", "ended_at", "schedule_every_min"]
        widgets = {
            "description": forms.Textarea(attrs={"rows": 3}),
            "started_at": forms.DateTimeInput(attrs={"type": "datetime-local"}),
            "ended_at": forms.DateTimeInput(attrs={"type": "datetime-local"}),
        }
        labels = {"schedule_every_min": "Capture every N minutes while running (0 = off)"}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["tags_text"].initial = " ".join(t.name for t in self.instance.tags.all())


class RunProcessForm(forms.Form):
    host = forms.ModelChoiceField(queryset=Host.objects.all())
    pid = forms.IntegerField(min_value=1)
    role = forms.CharField(max_length=100, required=False, help_text="e.g. target-0, rank 3")


class HostForm(forms.ModelForm):
    class Meta:
        model = Host
        fields = Host.EDITABLE_FIELDS
        widgets = {"notes": forms.Textarea(attrs={"rows": 2})}
