"""Serializer fields that read integers through `config.params` (ASCII digits, ranges)."""

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import QueryDict
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


# --- JSON values in their schema's type -----------------------------------------------
# DRF takes 1 and "1" for a boolean, "12" for an integer and 12 for a string; a client
# that sends the wrong type has a bug, and the schema says the type: a JSON body's value
# of another type is a 400 naming the field (a form or multipart body, all strings, is
# left to the fields).

_KINDS = {bool: "true or false", int: "a whole number", float: "a number", str: "a string",
          list: "an array", dict: "an object"}  # fmt: skip


def json_kind(value: object) -> str:
    """The JSON type of a parsed value, in words."""
    if value is None:
        return "null"
    for kind in (bool, int, float, str, list, dict):
        if isinstance(value, kind):
            return {"true or false": "a boolean"}.get(_KINDS[kind], _KINDS[kind])
    return type(value).__name__


def json_types(field: serializers.Field) -> tuple[type, ...] | None:
    """The Python types a JSON body may give `field` (None: any)."""
    if hasattr(field, "json_types"):
        return field.json_types
    if isinstance(field, serializers.BooleanField):
        return (bool,)
    if isinstance(field, StrictIntegerField | serializers.IntegerField):
        return (int,)
    if isinstance(field, StrictFloatField | serializers.FloatField | serializers.DecimalField):
        return (int, float)
    if isinstance(field, serializers.ChoiceField | serializers.CharField):
        return (str,)
    if isinstance(field, serializers.DateTimeField | serializers.DateField):
        return (str,)
    if isinstance(field, serializers.ListField | serializers.ListSerializer):
        return (list,)
    if isinstance(field, serializers.ManyRelatedField):
        return (list,)
    if isinstance(field, serializers.Serializer | serializers.DictField):
        return (dict,)
    return None


def json_type_problem(field: serializers.Field, name: str, value: object) -> str | None:
    """Why `value` is not of `field`'s JSON type, or None (null is the field's own
    business: allowed or refused by `allow_null`)."""
    types = json_types(field)
    if value is None or types is None:
        return None
    if isinstance(value, bool) != (bool in types) or not isinstance(value, types):
        wanted = " or ".join(dict.fromkeys(_KINDS[t] for t in types if t is not int or
                                           float not in types))  # fmt: skip
        return f"{name} must be {wanted}, not {json_kind(value)}"
    return None


class StrictJSON:
    """A request serializer mixin: each value of a JSON body in its field's type (a
    list's items in its child's), refused with a 400 naming the field otherwise.

    Its rules that a field cannot state are class attributes, stated in the schema by
    config.api_schema.StrictJSONScheme: `closed` (unknown fields are refused),
    `max_properties`, and `one_of`, groups of fields of which a body gives exactly one,
    whole (`(("host", "pid"), ("process",))`: host and pid, or process); other rules
    between fields come from `schema_rules`, written beside the `validate` that
    enforces them."""

    closed = False
    max_properties: int | None = None
    one_of: tuple[tuple[str, ...], ...] = ()

    def schema_rules(self, *, partial: bool = False) -> list[dict]:
        """The rules between fields that `validate` enforces, as JSON Schema clauses
        that all hold (`allOf`) for a body it takes; `partial`: a PATCH's body."""
        return []

    def get_fields(self):
        fields = super().get_fields()
        for field in fields.values():
            field = getattr(field, "child", field)  # a list's items as well
            if isinstance(field, serializers.CharField):
                # Taken as sent: a schema's maxLength and minLength count what is sent.
                field.trim_whitespace = False
        return fields

    def to_internal_value(self, data):
        if isinstance(data, dict):  # a form's or an absent body's QueryDict too
            problems = {}
            for name, field in self.fields.items():
                if field.read_only or name not in data or isinstance(data, QueryDict):
                    continue  # form values are all text: their fields read them
                problem = _problem(field, name, data[name])
                if problem:
                    problems[name] = [problem]
            problems.update(self._shape_problems(data))
            if problems:
                raise serializers.ValidationError(problems)
        return super().to_internal_value(data)

    def _shape_problems(self, data: dict) -> dict[str, list[str]]:
        if self.closed:
            unknown = [str(k)[:40] for k in data if k not in self.fields]
            if unknown:
                known = ", ".join(self.fields)
                return {unknown[0]: [f"unknown field {unknown[0]!r}: use {known}"]}
        if self.max_properties is not None and len(data) > self.max_properties:
            return {NO_FIELD: [f"at most {self.max_properties} fields"]}
        if self.one_of:
            whole = [group for group in self.one_of if all(f in data for f in group)]
            given = [group for group in self.one_of if any(f in data for f in group)]
            if len(whole) != 1 or len(given) != 1:
                said = " or ".join(" and ".join(group) for group in self.one_of)
                first = next((f for g in given for f in g if f not in data), None)
                name = first or self.one_of[0][0]
                return {name: [f"give {said} (one of them, whole)"]}
        return {}


NO_FIELD = "non_field_errors"
# White space as Python has it (str.isspace: what DRF's trimming strips and `\s` matches
# here), spelled out because the schema's readers match `\s` as ECMA-262 does, which
# leaves out \x1c-\x1f and takes U+FEFF: with `\s` a client's generator sent a name of
# one \x1e that the server called blank (Schemathesis, seed 2026).
SPACE = r"\t\n\x0b\x0c\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# Text with something besides white space, and no NUL (PostgreSQL cannot hold one).
NOT_BLANK = rf"^[^\x00]*[^\x00{SPACE}][^\x00]*$"


def _problem(field: serializers.Field, name: str, value: object) -> str | None:
    problem = json_type_problem(field, name, value)
    child = getattr(field, "child", None)
    if problem or not isinstance(value, list) or child is None:
        return problem
    for index, item in enumerate(value):
        problem = json_type_problem(child, f"{name}[{index}]", item)
        if problem:
            return problem
    return None


class NameOrIdField(serializers.Field):
    """An object named by its name (a string) or its id (a number): `"gpu-1"` or `3`.
    The view looks it up; the field checks the form."""

    json_types = (str, int)

    def __init__(self, *, max_length: int, **kwargs) -> None:
        self.max_length = max_length
        super().__init__(**kwargs)

    def to_internal_value(self, data) -> str | int:
        if isinstance(data, bool) or not isinstance(data, str | int):
            raise serializers.ValidationError(f"give a name or an id, not {json_kind(data)}")
        if isinstance(data, int):
            return parse_int(data, name=self.field_name, minimum=1, maximum=ID_MAX)
        if not data.strip() or len(data) > self.max_length or "\x00" in data:
            raise serializers.ValidationError(
                f"a name is 1 to {self.max_length} characters, not blank, without NUL"
            )
        return data

    def to_representation(self, value) -> str | int:
        return value
