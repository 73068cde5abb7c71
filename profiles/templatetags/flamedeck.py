"""Template helpers: percent bars, seconds, mapping lookups."""

from django import template

register = template.Library()


@register.filter
def pct(value) -> str:
    try:
        return f"{float(value):.1f}%"
    except (TypeError, ValueError):
        return "–"


@register.filter
def seconds(value) -> str:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return "–"
    if value >= 90:
        return f"{value / 60:.1f} min"
    return f"{value:.1f} s"


@register.filter
def get_item(mapping, key):
    return (mapping or {}).get(key)
