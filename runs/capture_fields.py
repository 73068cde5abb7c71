"""The capture settings (runs.capture_settings) as the rest of Django takes them: the one
validator `clean`, the API's serializers and their OpenAPI description, the
management command's options, and the JSON description served to the capture dialogs.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import ValidationError
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from rest_framework import serializers

from config.params import ID_MAX, parse_int

from .capture_settings import BY_NAME, CONFLICTS, SETTINGS, Setting, conflicts_in, describe, names

BOOL_WORDS = {"true": True, "false": False}  # what a form body or query string sends


def maximum(setting: Setting) -> int | None:
    """The setting's upper bound; a deployment's for those a Django setting caps."""
    if setting.maximum_setting:
        return getattr(django_settings, setting.maximum_setting)
    return setting.maximum


def _checked(setting: Setting, value: object) -> int | bool:
    """`value` as the setting's type, within its bounds; ValidationError naming it.
    Numbers go through config.params (ASCII digits only), like every outside integer."""
    if not setting.is_switch:
        high = maximum(setting)
        top = ID_MAX if high is None else high
        return parse_int(value, name=setting.name, minimum=setting.minimum or 0, maximum=top)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in BOOL_WORDS:
        return BOOL_WORDS[value.lower()]
    raise ValidationError({setting.name: f"{setting.name} must be true or false"})


def clean(
    values: Mapping[str, Any], *, kind: str = "record", job: bool = False
) -> dict[str, int | bool]:
    """Every setting, from `values` or its default (a whole-job capture's when `job`),
    checked: types, bounds, and the combinations py-spy refuses for `kind`. Raises
    ValidationError({name: reason}) naming each refused setting (or `settings` for
    names it does not know)."""
    unknown = sorted(set(values) - set(BY_NAME))
    if unknown:
        raise ValidationError({"settings": f"unknown settings: {', '.join(unknown)}"})
    cleaned, errors = {}, {}
    for setting in SETTINGS:
        try:
            given = values.get(setting.name, setting.default_for(job=job))
            cleaned[setting.name] = _checked(setting, given)
        except ValidationError as exc:
            errors.update(exc.message_dict)
    if errors:
        raise ValidationError(errors)
    refused = {c.field: c.message for c in conflicts_in(cleaned, kind=kind)}
    if refused:
        raise ValidationError(refused)
    return cleaned


def remembered(values: Mapping[str, Any]) -> dict[str, int | bool]:
    """The settings "Capture all" remembers on a run: a whole-job record's, checked."""
    cleaned = clean(values, kind="record", job=True)
    return {name: cleaned[name] for name in names("record")}


def page_description() -> dict[str, Any]:
    """What the capture dialogs build their controls from (json_script)."""
    caps = {s.maximum_setting: maximum(s) for s in SETTINGS if s.maximum_setting}
    return describe(maximums=caps)


# --- the API ---------------------------------------------------------------------------


class SettingField(serializers.Field):
    """A setting in a request body, taken as sent: the serializer's `validate` checks
    every setting at once with `clean` (types, bounds, refused combinations)."""

    def __init__(self, setting: Setting, *, job: bool = False) -> None:
        self.setting, self.job = setting, job
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


class CaptureSettingsSerializer(serializers.Serializer):
    """Every py-spy setting of a one-process capture (defaults, bounds and help from
    runs.capture_settings), checked together by `clean` in `validate`."""

    job = False  # a whole-job capture's defaults

    def get_fields(self) -> dict[str, serializers.Field]:
        settings = {s.name: SettingField(s, job=self.job) for s in SETTINGS}
        return {**settings, **super().get_fields()}

    def validate(self, attrs: dict) -> dict:
        given = {name: attrs.pop(name) for name in list(attrs) if name in BY_NAME}
        return {**attrs, **clean(given, kind=attrs.get("kind", "record"), job=self.job)}


class JobCaptureSettingsSerializer(CaptureSettingsSerializer):
    """Every py-spy setting of a whole-job capture: `idle` is on unless asked off
    (without it py-spy drops blocked threads' samples, and the waits between ranks are
    what a whole job is captured for)."""

    job = True


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


class RememberedSettingsSerializer(serializers.Serializer):
    """What "Capture all" opens with next time on a run (a whole-job record's
    settings); empty until it was used once."""

    def get_fields(self) -> dict[str, serializers.Field]:
        return {s.name: SettingField(s, job=True) for s in SETTINGS if s.name in names("record")}


# --- the command line ------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`--duration N`, `--rate N`, `--native/--no-native`, ...: each setting, its
    default left to `clean` (so absent options take the table's defaults)."""
    for s in SETTINGS:
        option = "--" + s.name.replace("_", "-")
        where = "" if len(s.kinds) > 1 else f" {s.kinds[0].capitalize()} only."
        default = {True: "on", False: "off"}[s.default] if s.is_switch else s.default
        text = f"{s.help}{where} Default: {default}."
        if s.is_switch:
            parser.add_argument(option, action=argparse.BooleanOptionalAction, help=text)
        else:
            parser.add_argument(option, metavar=s.unit.upper() or "N", help=text)


def given_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The settings a command line gave (argparse leaves the others None)."""
    return {name: options[name] for name in BY_NAME if options.get(name) is not None}
