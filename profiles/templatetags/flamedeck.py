"""Template helpers: percent bars, seconds, mapping lookups, sentences with code."""

from django import template
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import mark_safe

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


@register.filter
def code_spans(text) -> str:
    """An engine sentence with its `backticked` parts as <code>: the text (untrusted:
    frame names) is escaped first, then each pair of backticks becomes a code span; an
    unpaired backtick stays as it is."""
    parts = str(text if text is not None else "").split("`")
    if len(parts) % 2 == 0:  # an odd number of backticks: the last one is no delimiter
        parts[-2:] = [f"{parts[-2]}`{parts[-1]}"]
    html = [
        format_html("<code>{}</code>", part) if i % 2 else conditional_escape(part)
        for i, part in enumerate(parts)
    ]
    return mark_safe("".join(html))  # noqa: S308 - every part escaped above
