"""Forms for captures: comments, tags, imports, re-analysis and keyword sets."""

from django import forms
from django.core.exceptions import ValidationError

from config.form_fields import StrictModelChoiceField
from profiles.models import KeywordSet, keyword_text_problem
from runs.models import Run


class CommentForm(forms.Form):
    body = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=20000)
    frame = forms.CharField(max_length=1000, required=False, widget=forms.HiddenInput)


class CaptureTagsForm(forms.Form):
    tags = forms.CharField(required=False, max_length=500)


class ReanalyzeForm(forms.Form):
    keyword_set = StrictModelChoiceField(queryset=KeywordSet.objects.all(), empty_label=None)


class ImportForm(forms.Form):
    file = forms.FileField(help_text="py-spy raw (collapsed) or speedscope JSON")
    log = forms.FileField(required=False, help_text="py-spy's stdout, for the sampling-lag check")
    run = StrictModelChoiceField(queryset=Run.objects.all(), required=False)


class KeywordSetForm(forms.ModelForm):
    keywords_text = forms.CharField(
        label="Keywords",
        widget=forms.Textarea(attrs={"rows": 16, "class": "mono"}),
        help_text="One per line: `category: substring` (matched case-sensitively in frames).",
    )

    class Meta:
        model = KeywordSet
        fields = ["name", "description", "is_default"]
        widgets = {"description": forms.Textarea(attrs={"rows": 2})}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            lines = [f"{k.category}: {k.keyword}" for k in self.instance.keywords.all()]
            self.fields["keywords_text"].initial = "\n".join(lines)

    def clean_keywords_text(self) -> list[tuple[str, str]]:
        pairs = []
        for number, line in enumerate(self.cleaned_data["keywords_text"].splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            category, sep, keyword = line.partition(":")
            if not sep or not category.strip() or not keyword.strip():
                raise ValidationError(f"Line {number}: expected `category: keyword`, got {line!r}")
            problem = keyword_text_problem(category.strip(), keyword.strip())
            if problem:
                raise ValidationError(f"Line {number}: {problem}")
            pairs.append((category.strip(), keyword.strip()))
        if not pairs:
            raise ValidationError("A keyword set needs at least one keyword.")
        return pairs
