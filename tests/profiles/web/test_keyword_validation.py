"""Keyword sets refuse, at save, what the engine would refuse or the database not hold:
`re:` patterns RE2 does not take (lookaround, backreferences) and invalid ones, ones
matching every name, over-long text. Patterns that backtrack catastrophically on
Python's `re` are taken: they run on RE2, in time linear in the name."""

import pytest
from django.urls import reverse

from profiles.models import Keyword, KeywordSet

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("x: re:foo(?=bar)", "lookahead is not supported"),
        ("x: re:(a)\\1", "backreferences are not supported"),
        ("x: re:.*", "matches every name"),
        ("x: re:", "matches every name"),
        ("x: re:(", "bad regular expression"),
        ("x: " + "k" * 201, "at most 200 characters"),
        ("c" * 51 + ": k", "at most 50 characters"),
    ],
)
def test_the_keyword_set_form_refuses_a_bad_keyword_naming_its_line(owner_client, line, named):
    form = {
        "name": "mine",
        "description": "",
        "keywords_text": f"sync: cuStreamSynchronize\n{line}",
    }
    response = owner_client.post(reverse("profiles:keywordset_create"), form)
    assert response.status_code == 200
    text = response.content.decode()
    assert "Line 2:" in text and named in text.replace("&#x27;", "'").replace("&quot;", '"')
    assert not KeywordSet.objects.filter(name="mine").exists()


def test_the_reviews_slow_pattern_is_saved_and_a_capture_reanalysed_with_it_takes_ms(
    owner_client, owner, inline_analysis
):
    from profiles.captures import services
    from profiles.models import Capture
    from tests.profiles.web.test_views import imported

    slow = "re:^" + ".?" * 28 + "." * 28 + "!"
    form = {"name": "slow", "description": "", "keywords_text": f"x: {slow}"}
    assert owner_client.post(reverse("profiles:keywordset_create"), form).status_code == 302
    capture = imported(owner, raw="main (a.py:1);" + "a" * 37 + " (x.py:1) 5\n")
    services.capture_reanalyze(
        capture=capture, keyword_set=KeywordSet.objects.get(name="slow"), enqueue=True
    )
    capture.refresh_from_db()
    assert capture.status == Capture.Status.DONE, capture.error
    assert capture.progress["analysis"]["seconds"] < 5


def test_an_unsupported_pattern_is_refused_in_the_admin_too(client, django_user_model):
    root = django_user_model.objects.create_superuser("root", password="root-pass")
    client.force_login(root)
    form = {
        "name": "via admin",
        "description": "",
        "keywords-TOTAL_FORMS": "1",
        "keywords-INITIAL_FORMS": "0",
        "keywords-0-position": "0",
        "keywords-0-keyword": "re:(?<=a)b",
        "keywords-0-category": "x",
    }
    response = client.post("/admin/profiles/keywordset/add/", form)
    assert response.status_code == 200 and "lookbehind" in response.content.decode()
    assert not Keyword.objects.filter(keyword="re:(?<=a)b").exists()
