"""Errors under /api/ are JSON with one shape per status (config.api_errors): a 400 has
`detail` and the refused fields' reasons as lists; every other status `{"detail": …}`.
Pages outside /api/ keep their HTML."""

import json

import pytest
from django.contrib.auth.decorators import login_not_required
from django.http import HttpResponse
from django.test import override_settings
from django.urls import include, path

from runs.models import Run
from runs.tokens import api_token_create

pytestmark = pytest.mark.django_db


def _api(client, user):
    client.defaults["HTTP_AUTHORIZATION"] = f"Token {api_token_create(user=user)[1]}"
    return client


def _json_error(response, status: int) -> dict:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert isinstance(body["detail"], str) and body["detail"]
    return body


def test_a_400_names_each_field_with_a_list_of_reasons_and_says_the_first_in_detail(client, owner):
    api = _api(client, owner)
    response = api.post("/api/register/", {"run": "job", "host": "local", "pid": "12"},
                        "application/json")  # fmt: skip
    body = _json_error(response, 400)
    assert body["pid"] == ["pid must be a whole number, not a string"]
    assert body["detail"].startswith("pid: pid must be a whole number")


@pytest.mark.parametrize(
    ("field", "value"),
    [("native", "true"), ("native", 1), ("duration", "30"), ("duration", True)],
)
def test_a_value_of_another_json_type_is_refused_naming_the_field(client, owner, field, value):
    body = {"host": "local", "pid": 1, field: value}
    response = _api(client, owner).post("/api/captures/", body, "application/json")
    assert field in _json_error(response, 400)


def test_a_nested_field_is_named_by_its_dotted_path(client, owner):
    run = Run.objects.create(name="job")
    body = {"capture_settings": {"duration": "x"}}
    response = _api(client, owner).patch(f"/api/runs/{run.pk}/", body, "application/json")
    assert list(_json_error(response, 400)) == ["detail", "capture_settings.duration"]


def test_a_body_that_is_not_json_is_a_400_with_detail_only(client, owner):
    response = _api(client, owner).post("/api/runs/", b"\x00", "application/json")
    assert list(_json_error(response, 400)) == ["detail"]


def test_host_and_pid_or_process_is_one_of_two_whole_groups(client, owner):
    api = _api(client, owner)
    both = api.post("/api/captures/", {"host": "local", "pid": 1, "process": 1},
                    "application/json")  # fmt: skip
    assert "host and pid or process" in _json_error(both, 400)["detail"]
    half = api.post("/api/captures/", {"host": "local"}, "application/json")
    assert "pid" in _json_error(half, 400)


def test_anonymous_is_a_401_with_www_authenticate(client):
    response = client.get("/api/runs/")
    _json_error(response, 401)
    assert response["WWW-Authenticate"].startswith("Token")


def test_a_missing_permission_is_a_403(client, teammate):
    response = _api(client, teammate).post("/api/hosts/", {"name": "x"}, "application/json")
    _json_error(response, 403)


@pytest.mark.parametrize(
    "url", ["/api/nowhere/", "/api/captures/null,null/timeline/", "/api/runs/999999/"]
)
def test_an_unknown_url_or_object_under_api_is_a_json_404(client, owner, url):
    _json_error(_api(client, owner).get(url), 404)


def test_an_object_a_body_names_that_does_not_exist_is_a_404(client, owner):
    response = _api(client, owner).post("/api/captures/", {"process": 987654}, "application/json")
    assert "no run process 987654" in _json_error(response, 404)["detail"]


def test_a_method_the_endpoint_lacks_is_a_json_405_with_allow(client, owner):
    response = _api(client, owner).put("/api/runs/", {}, "application/json")
    _json_error(response, 405)
    assert "GET" in response["Allow"]


def test_a_taken_host_name_is_a_409(client, host_admin):
    response = _api(client, host_admin).post(
        "/api/hosts/", {"name": "local", "transport": "local"}, "application/json"
    )
    assert "exists already" in _json_error(response, 409)["detail"]


@override_settings(FLAMEDECK_MAX_UPLOAD_MB=1)
def test_a_body_over_the_limit_is_a_json_413(client, owner):
    big = b"x" * (1024 * 1024 + 1)
    response = _api(client, owner).post("/api/captures/import/", big, "text/plain")
    _json_error(response, 413)


def test_a_body_of_a_type_the_endpoint_does_not_take_is_a_json_415(client, owner):
    response = _api(client, owner).post("/api/runs/", "name=x", "text/plain")
    _json_error(response, 415)


@login_not_required
def _fails(request):
    raise RuntimeError("boom")


@login_not_required
def _throttled(request):
    return HttpResponse(
        "slow down", status=429, headers={"Retry-After": "3"}, content_type="text/plain"
    )


urlpatterns = [
    path("api/test-fails/", _fails),
    path("api/test-throttled/", _throttled),
    path("", include("config.urls")),
]


@override_settings(ROOT_URLCONF=__name__)
def test_a_server_error_under_api_is_a_json_500_and_a_page_keeps_its_html(client, owner):
    client.raise_request_exception = False
    response = client.get("/api/test-fails/")
    assert "server's log" in _json_error(response, 500)["detail"]
    page = client.get("/no-such-page/")
    assert page.status_code in (302, 404) and "json" not in page.get("Content-Type", "")


@override_settings(ROOT_URLCONF=__name__)
def test_a_429_under_api_is_json_and_keeps_retry_after(client):
    response = client.get("/api/test-throttled/")
    assert _json_error(response, 429)["detail"] == "slow down"
    assert response["Retry-After"] == "3"


def test_a_404_outside_api_keeps_its_html_page(client, owner):
    client.force_login(owner)
    response = client.get("/runs/99999999/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_a_refused_csrf_check_names_csrf_in_json_under_api_and_stays_a_page_elsewhere(rf):
    from config.api_errors import csrf_failure

    api = csrf_failure(rf.post("/api/runs/"), reason="CSRF token missing")
    assert api.status_code == 403 and api["Content-Type"] == "application/json"
    assert "CSRF verification failed (CSRF token missing)" in json.loads(api.content)["detail"]
    page = csrf_failure(rf.post("/runs/new/"), reason="CSRF token missing")
    assert page.status_code == 403 and page["Content-Type"].startswith("text/html")


def test_the_schemas_refusal_keeps_drfs_reason_as_json(django_user_model):
    """The schema view renders YAML; its refusal still says why, in JSON."""
    from django.test import Client

    user = django_user_model.objects.create_superuser("csrf-root", password="x")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    answer = client.post("/api/schema/")
    assert answer.status_code == 403 and "CSRF" in answer.json()["detail"]
