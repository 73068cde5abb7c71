"""The capture settings (runs.capture_settings) as the rest of Django takes them: the one
validator `clean`, the management command's options, and the JSON description served
to the capture dialogs. The API's serializers, built from the same table, are in
runs.capture_serializers: the services and the workers import this module, and
without Django REST framework and drf-spectacular a worker starts 0.25 CPU-s sooner.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import ValidationError

from config.params import ID_MAX, parse_int

from .capture_settings import BY_NAME, SETTINGS, Setting, conflicts_in, describe, names

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
