"""Template helpers: safe markdown for comments, percent bars, sparklines."""

import markdown as markdown_lib
import nh3
from django import template
from django.utils.safestring import mark_safe

register = template.Library()

_ALLOWED_TAGS = {
    "p",
    "br",
    "strong",
    "em",
    "code",
    "pre",
    "ul",
    "ol",
    "li",
    "blockquote",
    "a",
    "h3",
    "h4",
    "h5",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "hr",
}


@register.filter
def markdown_safe(text: str) -> str:
    """Markdown rendered to HTML, then cleaned by nh3: no scripts, handlers or raw HTML."""
    html = markdown_lib.markdown(text or "", extensions=["fenced_code", "tables"])
    cleaned = nh3.clean(
        html,
        tags=_ALLOWED_TAGS,
        attributes={"a": {"href", "title"}},
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
    return mark_safe(cleaned)  # noqa: S308 — nh3 just sanitised it


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
