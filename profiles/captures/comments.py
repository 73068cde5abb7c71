"""Comments are rendered once, when saved: Markdown to HTML, then sanitised.

markdown-it-py (CommonMark, plus tables) parses in time linear in the text, and
block nesting stops at MAX_NESTING levels, so no comment (`"[" * 19000`, `"1. " * 600`)
can make a page slow or fail: pages show the stored HTML and never parse Markdown.
Raw HTML in a comment is shown as text; nh3 then keeps only the tags below, links
with http(s)/mailto targets, and marks every link noopener/nofollow.
"""

import nh3
from markdown_it import MarkdownIt

MAX_NESTING = 20
ALLOWED_TAGS = {
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
_MARKDOWN = MarkdownIt("commonmark", {"maxNesting": MAX_NESTING, "html": False}).enable("table")


def render_comment(text: str) -> str:
    """A comment's Markdown as sanitised HTML (safe to show as it is)."""
    html = _MARKDOWN.render(text or "")
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes={"a": {"href", "title"}},
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
