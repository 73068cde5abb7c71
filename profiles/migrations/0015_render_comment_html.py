"""Existing comments get their stored HTML (pages no longer render Markdown)."""

from django.db import migrations

BATCH = 500


def render_existing(apps, schema_editor):
    from profiles.comment_html import render_comment

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
