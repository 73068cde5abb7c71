"""Comments: rendered once when saved, by a parser linear in its input; pathological
Markdown never makes a capture page fail; host admins and staff remove any comment."""

import importlib

import pytest
from django.apps import apps
from django.urls import reverse

from profiles.captures import comments as comment_html
from profiles.captures import services
from profiles.models import Comment
from tests.profiles.web.test_views import imported

pytestmark = pytest.mark.django_db

# The review's inputs and relatives: deep brackets, emphasis runs, nested quotes and
# lists, link and image openers, tables, fences (bench/app/bench_hostile.py times them).
PATHOLOGICAL = {
    "brackets": "[" * 19000,
    "stars": "*" * 19000,
    "quotes": ">" * 19000,
    "ordered list": "1. " * 600,
    "bullets": "- " * 6000,
    "underscores": "_" * 19000,
    "link openers": "[a](" * 5000,
    "image openers": "![" * 9000,
    "emphasis mix": "*_" * 4999 + "a" + "_*" * 4999,
    "nested links": "[" * 3000 + "a" + "](b)" * 3000,
    "angle brackets": "<" * 19000,
    "backslashes": "\\" * 19000,
    "backticks": "a`" * 9000,
    "quoted lists": "> 1. " * 4000,
    "deep list": "".join("  " * i + "- a\n" for i in range(130)),
    "fences": "```\n" * 5000,
    "table": "|a" * 200 + "\n" + "|-" * 200 + "\n" + ("|a" * 200 + "\n") * 40,
}
assert all(len(body) <= 20000 for body in PATHOLOGICAL.values())  # the form's limit


@pytest.fixture
def capture(owner):
    return imported(owner)


def _post_comment(client, capture, body: str):
    return client.post(reverse("profiles:capture_comment", args=[capture.pk]), {"body": body})


def test_pathological_markdown_leaves_the_capture_page_answering_for_everyone(
    client, capture, owner, teammate
):
    client.force_login(teammate)
    for name, body in PATHOLOGICAL.items():
        assert _post_comment(client, capture, body).status_code == 302, name
    assert capture.comments.count() == len(PATHOLOGICAL)
    for user in (teammate, owner):
        client.force_login(user)
        page = client.get(capture.get_absolute_url())
        assert page.status_code == 200
        assert page.content.decode().count('class="commentbody"') == len(PATHOLOGICAL)


def test_a_page_shows_the_stored_html_and_never_parses_markdown(
    client, capture, teammate, monkeypatch
):
    comment = services.comment_create(capture=capture, author=teammate, body="**sync** fell")
    assert comment.body_html == "<p><strong>sync</strong> fell</p>\n"

    def refuse(text):
        raise AssertionError("a page rendered Markdown")

    monkeypatch.setattr(comment_html._MARKDOWN, "render", refuse)
    client.force_login(teammate)
    page = client.get(capture.get_absolute_url()).content.decode()
    assert "<p><strong>sync</strong> fell</p>" in page


def test_an_edit_renders_the_new_text(client, capture, teammate):
    comment = services.comment_create(capture=capture, author=teammate, body="first")
    services.comment_update(comment=comment, editor=teammate, body="*second*")
    assert Comment.objects.get(pk=comment.pk).body_html == "<p><em>second</em></p>\n"


def test_raw_html_and_script_links_stay_text(capture, teammate):
    body = '<img src=x onerror="alert(1)"> [x](javascript:alert(1)) [ok](https://example.org)'
    html = services.comment_create(capture=capture, author=teammate, body=body).body_html
    assert "<img" not in html and 'href="javascript' not in html
    assert "&lt;img src=x" in html
    assert '<a href="https://example.org" rel="noopener noreferrer nofollow">ok</a>' in html


def test_nesting_is_bounded(capture, teammate):
    deep = "".join("  " * i + "- a\n" for i in range(200))
    html = services.comment_create(capture=capture, author=teammate, body=deep).body_html
    assert html.count("<ul>") <= comment_html.MAX_NESTING


def test_host_admins_and_staff_remove_any_comment_and_viewers_only_their_own(
    client, capture, owner, teammate, host_admin, django_user_model
):
    staff = django_user_model.objects.create_user("staffer", password="x", is_staff=True)
    delete = lambda c: reverse("profiles:comment_delete", args=[capture.pk, c.pk])  # noqa: E731
    notes = [services.comment_create(capture=capture, author=teammate, body=f"n{i}") for i in "abc"]
    client.force_login(owner)  # an operator who is not a host admin
    assert client.post(delete(notes[0])).status_code == 403
    for remover, note in ((host_admin, notes[0]), (staff, notes[1]), (teammate, notes[2])):
        client.force_login(remover)
        page = client.get(capture.get_absolute_url()).content.decode()
        assert f'comments/{note.pk}/delete/"' in page, remover
        assert client.post(delete(note)).status_code == 302, remover
    assert not Comment.objects.exists()


def test_comments_are_in_the_admin(client, capture, teammate, django_user_model):
    comment = services.comment_create(capture=capture, author=teammate, body="[" * 19000)
    root = django_user_model.objects.create_superuser("root", password="root-pass")
    client.force_login(root)
    assert client.get("/admin/profiles/comment/").status_code == 200
    assert client.get(f"/admin/profiles/comment/{comment.pk}/change/").status_code == 200
    response = client.post(f"/admin/profiles/comment/{comment.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302 and not Comment.objects.exists()


def test_the_data_migration_renders_existing_comments(capture, teammate):
    comment = services.comment_create(capture=capture, author=teammate, body="*old*")
    Comment.objects.filter(pk=comment.pk).update(body_html="")
    migration = importlib.import_module("profiles.migrations.0015_render_comment_html")
    migration.render_existing(apps, None)
    assert Comment.objects.get(pk=comment.pk).body_html == "<p><em>old</em></p>\n"
