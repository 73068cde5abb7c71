"""CSRF: the test client skips Django's check unless asked, so these clients enforce it.

For every URL the resolver knows (pages, admin and the session-authenticated API):
a POST, PUT, PATCH or DELETE without the token is refused with 403 and the CSRF
reason; with the token (the form field for page POSTs, the X-CSRFToken header that
static/js/base.js sends otherwise) it is not. A call authenticated by an API token
carries no cookie an attacker could ride, so it needs no CSRF token.
"""

import pytest
from django.test import Client

from runs.models import Run
from runs.tokens import api_token_create
from tests.test_error_corpus import real_urls, world  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db

WRITES = ["post", "put", "patch", "delete"]


def _refused_for_csrf(response) -> bool:
    return response.status_code == 403 and b"CSRF" in response.content


@pytest.fixture
def root(django_user_model):
    """A superuser: no write is refused for want of a permission, only for CSRF."""
    return django_user_model.objects.create_superuser("root", password="root-pass")


def _session(user) -> tuple[Client, str]:
    client = Client(enforce_csrf_checks=True, raise_request_exception=False)
    client.force_login(user)
    client.get("/")  # the page's logout form sets the csrftoken cookie
    return client, client.cookies["csrftoken"].value


def test_every_write_without_the_token_is_refused(world, root):  # noqa: F811
    client, _token = _session(root)
    checked = 0
    for url, _name, _route in real_urls(world["ids"]):
        for method in WRITES:
            response = getattr(client, method)(url)
            checked += 1
            assert _refused_for_csrf(response), (method, url, response.status_code)
    assert checked > 200 and Run.objects.filter(pk=world["run"].pk).exists()
    print(f"\ncsrf: {checked} writes without a token, all refused")


def test_every_write_with_the_token_passes_the_check(world, root):  # noqa: F811
    client, token = _session(root)
    checked = 0
    for url, name, _route in real_urls(world["ids"]):
        if name == "logout":  # would end the session the rest of the walk needs
            continue
        for method in WRITES:
            if method == "post" and not url.startswith("/api/"):
                response = client.post(url, {"csrfmiddlewaretoken": token})
            else:
                response = getattr(client, method)(url, HTTP_X_CSRFTOKEN=token)
            checked += 1
            assert not _refused_for_csrf(response), (method, url, response.content[:200])
    assert checked > 200


def test_a_page_form_and_a_session_api_call_with_the_token_take_effect(world, root):  # noqa: F811
    client, token = _session(root)
    form = {"name": "via form", "status": "running", "schedule_every_min": "0"}
    assert client.post("/runs/new/", form).status_code == 403
    assert client.post("/runs/new/", {**form, "csrfmiddlewaretoken": token}).status_code == 302
    body = {"name": "via api"}
    assert client.post("/api/runs/", body, content_type="application/json").status_code == 403
    created = client.post(
        "/api/runs/", body, content_type="application/json", HTTP_X_CSRFTOKEN=token
    )
    assert created.status_code == 201
    assert client.post("/accounts/logout/").status_code == 403  # no forced logout either
    assert set(Run.objects.values_list("name", flat=True)) >= {"via form", "via api"}


def test_token_authenticated_api_calls_need_no_csrf_token(world, root):  # noqa: F811
    _token, key = api_token_create(user=root)
    client = Client(enforce_csrf_checks=True, raise_request_exception=False)
    auth = {"HTTP_AUTHORIZATION": f"Token {key}"}
    checked = 0
    for url, name, _route in real_urls(world["ids"]):
        if not url.startswith("/api/") or name == "docs":  # the reference is a page
            continue
        for method in WRITES:
            response = getattr(client, method)(url, content_type="application/json", **auth)
            checked += 1
            assert not _refused_for_csrf(response), (method, url, response.content[:200])
            assert response.status_code != 401, (method, url)
    created = client.post("/api/runs/", {"name": "by token"}, content_type="application/json",
                          **auth)  # fmt: skip
    assert created.status_code == 201 and checked > 50
