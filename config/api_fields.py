"""Serializer fields that read integers through `config.params` (ASCII digits, ranges)."""

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers

from config.params import ID_MAX, PID_MAX, parse_float, parse_int


class StrictIntegerField(serializers.Field):
    """An integer in minimum..maximum; "²", "1e3", 2**63 and booleans are refused."""

    def __init__(self, *, minimum: int = 0, maximum: int = ID_MAX, **kwargs) -> None:
        self.minimum, self.maximum = minimum, maximum
        super().__init__(**kwargs)

    def to_internal_value(self, data) -> int:
        try:
            return parse_int(
                data, name=self.field_name or "value", minimum=self.minimum, maximum=self.maximum
            )
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.messages) from None

    def to_representation(self, value) -> int:
        return int(value)


def IdField(**kwargs) -> StrictIntegerField:  # noqa: N802 - reads like a field class
    return StrictIntegerField(minimum=1, maximum=ID_MAX, **kwargs)


def PidField(**kwargs) -> StrictIntegerField:  # noqa: N802
    return StrictIntegerField(minimum=1, maximum=PID_MAX, **kwargs)


class StrictFloatField(serializers.Field):
    """A finite number in minimum..maximum; booleans, "٣", "nan" and "inf" are refused
    (DRF's FloatField takes `true` for 1.0 and any string `float()` reads)."""

    def __init__(self, *, minimum: float, maximum: float, **kwargs) -> None:
        self.minimum, self.maximum = minimum, maximum
        super().__init__(**kwargs)

    def to_internal_value(self, data) -> float:
        try:
            return parse_float(
                data, name=self.field_name or "value", minimum=self.minimum, maximum=self.maximum
            )
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.messages) from None

    def to_representation(self, value) -> float:
        return float(value)
