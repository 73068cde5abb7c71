"""Form fields that read integers through `config.params` (ASCII digits, ranges).

Django's IntegerField and ModelChoiceField call `int()`, which takes "٣" for 3.
"""

from django import forms
from django.core.exceptions import ValidationError

from config.params import ID_MAX, parse_id, parse_int


class StrictIntegerFormField(forms.IntegerField):
    def __init__(self, *, min_value: int = 0, max_value: int = ID_MAX, **kwargs) -> None:
        super().__init__(min_value=min_value, max_value=max_value, **kwargs)

    def to_python(self, value):
        if value in self.empty_values:
            return None
        try:
            return parse_int(value, name="value", minimum=self.min_value, maximum=self.max_value)
        except ValidationError as exc:
            raise ValidationError(exc.messages, code="invalid") from None


class StrictModelChoiceField(forms.ModelChoiceField):
    """A model chosen by primary key, the key read as a strict id first."""

    def to_python(self, value):
        if value in self.empty_values:
            return None
        if not isinstance(value, self.queryset.model):
            try:
                value = parse_id(value, name=self.to_field_name or "id")
            except ValidationError:
                raise ValidationError(
                    self.error_messages["invalid_choice"], code="invalid_choice"
                ) from None
        return super().to_python(value)
