"""Keyword sets refuse, at save, what the engine would refuse or the database not hold:
catastrophic and invalid `re:` patterns, ones matching every name, over-long text."""

import pytest
from django.urls import reverse

from profiles.models import Keyword, KeywordSet

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("x: re:^(a+)+$", "exponential time"),
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


def test_a_catastrophic_pattern_is_refused_in_the_admin_too(client, django_user_model):
    root = django_user_model.objects.create_superuser("root", password="root-pass")
    client.force_login(root)
    form = {
        "name": "via admin",
        "description": "",
        "keywords-TOTAL_FORMS": "1",
        "keywords-INITIAL_FORMS": "0",
        "keywords-0-position": "0",
        "keywords-0-keyword": "re:^(a+)+$",
        "keywords-0-category": "x",
    }
    response = client.post("/admin/profiles/keywordset/add/", form)
    assert response.status_code == 200 and "exponential time" in response.content.decode()
    assert not Keyword.objects.filter(keyword="re:^(a+)+$").exists()
