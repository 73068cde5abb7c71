"""One parser for every integer that arrives from outside (query strings, JSON bodies,
form fields, URL parts): ASCII digits only, within a stated range.

`int(...)` alone accepts Unicode digits ("²", "٣"), signs, underscores and values past
what PostgreSQL's bigint holds, which then surface as 500s deep in the ORM.
"""

import math
import re

from django.core.exceptions import ValidationError

from runs.remote.model import PID_MAX  # Linux's pid_max limit (2^22), the builder's too

# Largest value a PostgreSQL bigint (Django's BigAutoField) holds.
ID_MAX = 2**63 - 1
_ASCII_INT = re.compile(r"-?[0-9]+\Z", re.ASCII)
# Up to 24 decimals: a double's 17 significant digits after the zeros Python (up to 4,
# `0.00012345678901234567`) or JavaScript (up to 6) writes before them (a timeline's
# `from`/`to`). An exponent too (`1e-05`: how both write a smaller number), of at most
# three digits.
_ASCII_DECIMAL = re.compile(
    r"-?(?:[0-9]{1,15}(?:\.[0-9]{0,24})?|\.[0-9]{1,24})(?:[eE][-+]?[0-9]{1,3})?\Z", re.ASCII
)


def parse_int(value: object, *, name: str, minimum: int = 0, maximum: int = ID_MAX) -> int:
    """`value` as an int in minimum..maximum, or ValidationError({name: reason}).

    Accepts a real int (not a bool) or a string of ASCII digits with an optional
    leading minus sign; anything else, and anything out of range, is refused.
    """
    if isinstance(value, bool):
        raise ValidationError({name: f"{name} must be a whole number, not {value!r}"})
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and _ASCII_INT.match(text := value.strip()):
        # More significant digits than either bound has: out of range, said without
        # `int()` (slow on a long string, and refused past 4,300 digits, zeros too).
        digits = text.lstrip("-").lstrip("0") or "0"
        if len(digits) > len(str(max(abs(minimum), abs(maximum)))):
            raise ValidationError({name: f"{name} must be between {minimum} and {maximum}"})
        number = -int(digits) if text.startswith("-") else int(digits)
    else:
        shown = value if not isinstance(value, str) else value[:40]
        raise ValidationError({name: f"{name} must be a whole number, not {shown!r}"})
    if not minimum <= number <= maximum:
        raise ValidationError({name: f"{name} must be between {minimum} and {maximum}"})
    return number


def parse_float(value: object, *, name: str, minimum: float, maximum: float) -> float:
    """`value` as a finite number in minimum..maximum, or ValidationError({name: reason}).

    A real int or float (not a bool), or a string of ASCII digits with an optional
    minus sign and decimal point; `float()` alone takes "٣", "1_0", "nan" and "inf"."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValidationError({name: f"{name} must be a number, not {_shown(value)!r}"})
    if isinstance(value, str):
        if not _ASCII_DECIMAL.match(value.strip()):
            raise ValidationError({name: f"{name} must be a number, not {_shown(value)!r}"})
        value = float(value.strip())
    number = float(value)
    if not (math.isfinite(number) and minimum <= number <= maximum):
        raise ValidationError({name: f"{name} must be between {minimum:g} and {maximum:g}"})
    return number


def _shown(value: object) -> object:
    return value[:40] if isinstance(value, str) else value


def parse_id(value: object, *, name: str = "id") -> int:
    """A database primary key: 1..2^63-1."""
    return parse_int(value, name=name, minimum=1, maximum=ID_MAX)


def parse_pid(value: object, *, name: str = "pid") -> int:
    """A Linux process id: 1..4194304."""
    return parse_int(value, name=name, minimum=1, maximum=PID_MAX)


def query_int(
    params, name: str, *, minimum: int = 0, maximum: int = ID_MAX, allow_blank: bool = True
) -> int | None:
    """An optional integer query parameter: None when absent or empty (a page's form
    sends its empty fields; the API, `allow_blank=False`, refuses them), else parsed (a
    bad value raises ValidationError, which pages and the API answer with 400)."""
    value = params.get(name, "")
    if not allow_blank and name in params:
        return parse_int(value, name=name, minimum=minimum, maximum=maximum)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return parse_int(value, name=name, minimum=minimum, maximum=maximum)


def query_id(params, name: str) -> int | None:
    """An optional primary key in the query string (`?run=`, `?host=`, `?ks=`)."""
    return query_int(params, name, minimum=1)


def query_page(params) -> int:
    """`?page=`: 1 when absent or empty, else an integer from 1 (Paginator's own
    `int()` takes "٣" for 3 and turns "x" into page 1 silently). A page past the last
    shows the last (Paginator.get_page)."""
    return query_int(params, "page", minimum=1) or 1


def query_ids(params, name: str) -> set[int]:
    """Every value of a repeated id parameter (`?capture=1&capture=2`)."""
    return {parse_id(value, name=name) for value in params.getlist(name) if value.strip()}


def cli_int(*, minimum: int = 0, maximum: int = ID_MAX):
    """An argparse `type=` for management commands, with the same rules."""
    import argparse

    def convert(value: str) -> int:
        try:
            return parse_int(value, name="value", minimum=minimum, maximum=maximum)
        except ValidationError as exc:
            raise argparse.ArgumentTypeError("; ".join(exc.messages)) from None

    return convert


def pid_validators() -> list:
    """Model field validators for a PID column."""
    from django.core.validators import MaxValueValidator, MinValueValidator

    return [MinValueValidator(1), MaxValueValidator(PID_MAX)]
