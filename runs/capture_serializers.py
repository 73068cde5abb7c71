"""The capture settings (runs.capture_settings) in the JSON API: one field per setting,
the serializers of a capture request and of an answer, and their OpenAPI description.
Every value is checked by runs.capture_fields.clean, the one validator."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from rest_framework import serializers

from config.api_fields import StrictJSON

from .capture_fields import clean, maximum
from .capture_settings import BY_NAME, CONFLICTS, SETTINGS, Setting, names


class SettingField(serializers.Field):
    """A setting in a request body, taken as sent: the serializer's `validate` checks
    every setting at once with `clean` (types, bounds, refused combinations)."""

    def __init__(self, setting: Setting, *, job: bool = False) -> None:
        self.setting, self.job = setting, job
        self.json_types = (bool,) if setting.is_switch else (int,)  # config.api_fields
        super().__init__(required=False, help_text=setting.help)

    def to_internal_value(self, data: object) -> object:
        return data

    def to_representation(self, value: object) -> object:
        return value


class SettingFieldScheme(OpenApiSerializerFieldExtension):
    """A setting's type, bounds and default (a whole-job capture's in its request)."""

    target_class = SettingField

    def map_serializer_field(self, auto_schema, direction) -> dict[str, Any]:
        setting = self.target.setting
        schema: dict[str, Any] = {"default": setting.default_for(job=self.target.job)}
        if setting.is_switch:
            return {"type": "boolean", **schema}
        bounds = {"minimum": setting.minimum, "maximum": maximum(setting)}
        return {"type": "integer", **schema, **bounds}


class CaptureSettingsSerializer(StrictJSON, serializers.Serializer):
    """Every py-spy setting of a one-process capture (defaults, bounds and help from
    runs.capture_settings), checked together by `clean` in `validate`."""

    job = False  # a whole-job capture's defaults

    def get_fields(self) -> dict[str, serializers.Field]:
        settings = {s.name: SettingField(s, job=self.job) for s in SETTINGS}
        return {**settings, **super().get_fields()}

    def validate(self, attrs: dict) -> dict:
        given = {name: attrs.pop(name) for name in list(attrs) if name in BY_NAME}
        return {**attrs, **clean(given, kind=attrs.get("kind", "record"), job=self.job)}

    def schema_rules(self, *, partial: bool = False) -> list[dict]:
        return conflict_rules(job=self.job, kinds="kind" in self.fields)


class JobCaptureSettingsSerializer(CaptureSettingsSerializer):
    """Every py-spy setting of a whole-job capture: `idle` is on unless asked off
    (without it py-spy drops blocked threads' samples, and the waits between ranks are
    what a whole job is captured for)."""

    job = True
    kind = serializers.ChoiceField(
        choices=[("record", "record"), ("dump", "dump")],
        default="record",
        help_text='`record` samples every rank for `duration` seconds; `dump` ("Dump all '
        "ranks\", for a job that hangs) prints every rank's stacks with `py-spy dump` "
        "`repeat` times, `interval` seconds apart, and says which ranks stand where.",
    )
    repeat = serializers.IntegerField(
        min_value=1, max_value=10, default=3, help_text="Dumps of each rank (kind dump)."
    )
    interval = serializers.FloatField(
        min_value=0,
        max_value=30,
        default=1.0,
        help_text="Seconds between two dumps of a rank (kind dump).",
    )

    def validate(self, attrs: dict) -> dict:
        if attrs["interval"] > longest_interval(attrs["repeat"]):
            raise serializers.ValidationError(
                {"interval": f"(repeat - 1) x interval may span {MAX_DUMP_SPAN_S:g} s at most: "
                 "a hung job is told apart from a slow one within seconds"}
            )  # fmt: skip
        return super().validate(attrs)

    def schema_rules(self, *, partial: bool = False) -> list[dict]:
        # The span as bounds a schema can state: `interval`'s maximum for each `repeat`
        # (the same division `validate` compares with, so the bounds match exactly).
        repeat, interval = self.fields["repeat"], self.fields["interval"]

        def span(given: dict, repeats: int) -> dict:
            longest = longest_interval(repeats)
            if longest < interval.max_value:  # else no bound beyond the field's own
                given.setdefault("properties", {})["interval"] = {"maximum": longest}
            return given

        spans = [
            span({"not": {"required": ["repeat"]}}, repeat.default),
            *(
                span({"required": ["repeat"], "properties": {"repeat": {"enum": [n]}}}, n)
                for n in range(repeat.min_value, repeat.max_value + 1)
            ),
        ]
        return [*super().schema_rules(partial=partial), {"anyOf": spans}]


MAX_DUMP_SPAN_S = 30.0


def longest_interval(repeat: int) -> float:
    """The longest `interval` whose `repeat` dumps span MAX_DUMP_SPAN_S at most."""
    return MAX_DUMP_SPAN_S / (repeat - 1) if repeat > 1 else MAX_DUMP_SPAN_S


def conflict_rules(*, job: bool, kinds: bool) -> list[dict]:
    """CONFLICTS as JSON Schema: for each, not every one of its settings on (given
    true, or left out with a default of true), for a capture of its kinds (`kinds`:
    the body has a `kind`, record by default; without one it is a record)."""
    rules = []
    for conflict in CONFLICTS:
        if not kinds and "record" not in conflict.kinds:
            continue
        every = [
            {"properties": {name: {"enum": [True]}}}
            | ({} if BY_NAME[name].default_for(job=job) is True else {"required": [name]})
            for name in conflict.settings
        ]
        if kinds:
            kind = {"properties": {"kind": {"enum": list(conflict.kinds)}}}
            every.append(kind if "record" in conflict.kinds else {**kind, "required": ["kind"]})
        rules.append({"not": {"allOf": every}})
    return rules


def _refused_together() -> str:
    return " ".join(
        f"Refused together: {' with '.join(c.settings)} ({c.message})." for c in CONFLICTS
    )


CaptureSettingsSerializer.__doc__ += " " + _refused_together()
JobCaptureSettingsSerializer.__doc__ += " " + _refused_together()


class SettingsAnswerSerializer(serializers.Serializer):
    """Every py-spy setting, as an answer shows it."""

    def get_fields(self) -> dict[str, serializers.Field]:
        kinds = {True: serializers.BooleanField, False: serializers.IntegerField}
        return {s.name: kinds[s.is_switch](help_text=s.help) for s in SETTINGS}


class RememberedSettingsSerializer(StrictJSON, serializers.Serializer):
    """What "Capture all" opens with next time on a run (a whole-job record's
    settings); empty until it was used once."""

    closed = True  # runs.capture_fields.remembered refuses any other name

    def get_fields(self) -> dict[str, serializers.Field]:
        return {s.name: SettingField(s, job=True) for s in SETTINGS if s.name in names("record")}

    def schema_rules(self, *, partial: bool = False) -> list[dict]:
        return conflict_rules(job=True, kinds=False)
