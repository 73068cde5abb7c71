"""Check a JSON-like value against a TypedDict of profiles/pyspy/core/types.py: every required
key present, no key the TypedDict does not name, every value of its declared type
(str, int, float, bool, None, Literal, unions, list[...], dict[..., ...], nested
TypedDicts). NotRequired keys may be missing. Returns the problems, as paths."""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, NotRequired, get_args, get_origin, get_type_hints


def problems(value: Any, hint: Any, path: str = "$") -> list[str]:
    """Where `value` departs from `hint` (empty when it fits)."""
    origin = get_origin(hint)
    if hint is Any:
        return []
    if hint is None or hint is type(None):
        return [] if value is None else [f"{path}: {value!r} is not None"]
    if origin is Literal:
        return [] if value in get_args(hint) else [f"{path}: {value!r} not in {get_args(hint)}"]
    if origin in (typing.Union, types.UnionType):
        found = [problems(value, option, path) for option in get_args(hint)]
        return [] if any(not f for f in found) else min(found, key=len)
    if origin is list:
        if not isinstance(value, list):
            return [f"{path}: {type(value).__name__} is not a list"]
        (item,) = get_args(hint)
        return [p for i, v in enumerate(value) for p in problems(v, item, f"{path}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__} is not a dict"]
        key_hint, value_hint = get_args(hint)
        return [
            p
            for k, v in value.items()
            for p in problems(k, key_hint, f"{path}.<key>") + problems(v, value_hint, f"{path}.{k}")
        ]
    if typing.is_typeddict(hint):
        return _typed_dict(value, hint, path)
    return _plain(value, hint, path)


def _typed_dict(value: Any, hint: Any, path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: {type(value).__name__} is not a {hint.__name__}"]
    fields = get_type_hints(hint, include_extras=True)
    found = [f"{path}: unexpected key {k!r}" for k in value if k not in fields]
    for key, field in fields.items():
        optional = get_origin(field) is NotRequired
        inner = get_args(field)[0] if optional else field
        if key not in value:
            if not optional:
                found.append(f"{path}: missing {key!r}")
            continue
        found += problems(value[key], inner, f"{path}.{key}")
    return found


def _plain(value: Any, hint: Any, path: str) -> list[str]:
    if hint is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, hint)
    return [] if ok else [f"{path}: {value!r} is not {getattr(hint, '__name__', hint)}"]
