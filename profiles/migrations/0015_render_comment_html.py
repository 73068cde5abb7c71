"""Existing comments get their stored HTML (pages no longer render Markdown).

The renderer is frozen here, copied from profiles/captures/comments.py as it was when this
migration was written (not imported from it), so this migration means the same thing
whenever it runs: markdown-it (CommonMark plus tables, nesting bounded, raw HTML shown
as text), then nh3 keeping only the tags below.
"""

import functools

import nh3
from django.db import migrations
from markdown_it import MarkdownIt

BATCH = 500
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


@functools.cache
def _markdown() -> MarkdownIt:
    # Built on first use: every `migrate` imports this module, few run it.
    return MarkdownIt("commonmark", {"maxNesting": MAX_NESTING, "html": False}).enable("table")


def render_comment(text: str) -> str:
    return nh3.clean(
        _markdown().render(text or ""),
        tags=ALLOWED_TAGS,
        attributes={"a": {"href", "title"}},
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )


def render_existing(apps, schema_editor):
    Comment = apps.get_model("profiles", "Comment")
    batch = []
    for comment in Comment.objects.only("pk", "body").iterator(chunk_size=BATCH):
        comment.body_html = render_comment(comment.body)
        batch.append(comment)
        if len(batch) >= BATCH:
            Comment.objects.bulk_update(batch, ["body_html"])
            batch = []
    Comment.objects.bulk_update(batch, ["body_html"])


class Migration(migrations.Migration):
    dependencies = [("profiles", "0014_comment_body_html")]

    operations = [migrations.RunPython(render_existing, migrations.RunPython.noop)]
