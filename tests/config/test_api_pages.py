"""The API's front door: `/api/` lists the schema, the reference and every endpoint;
`/api/schema/` and `/api/docs/` need a login; a browser that asks an endpoint for HTML
gets its JSON on a page (not 406), while programs keep getting JSON."""

import html
import json
import re

import pytest
from django.contrib.staticfiles import finders
from django.test import Client
from drf_spectacular.generators import SchemaGenerator

from runs.models import Run
from runs.tokens import api_token_create

pytestmark = pytest.mark.django_db

BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,*/*;q=0.8"


def test_the_api_index_links_the_schema_the_reference_and_every_endpoint(teammate_client):
    body = teammate_client.get("/api/").json()
    assert body["schema"] == "http://testserver/api/schema/"
    assert body["docs"] == "http://testserver/api/docs/"
    assert "Authorization: Token <key>" in body["authentication"]
    spec = SchemaGenerator().get_schema(request=None, public=True)
    assert set(body["endpoints"]) == set(spec["paths"]) - {"/api/"}


def test_the_index_the_schema_and_the_reference_need_a_login(client):
    assert client.get("/api/").status_code == 401
    assert client.get("/api/schema/").status_code == 401
    response = client.get("/api/docs/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_the_schema_is_served_as_yaml_or_json_to_a_token(owner):
    _, key = api_token_create(user=owner)
    client = Client(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/schema/").content.startswith(b"openapi: 3.")
    spec = json.loads(client.get("/api/schema/?format=json").content)
    assert "/api/register/" in spec["paths"]


def test_the_schema_rendered_once_is_served_again_in_each_format_with_its_type(owner):
    from config.api_views import SchemaView

    SchemaView._rendered.clear()
    client = Client(HTTP_AUTHORIZATION=f"Token {api_token_create(user=owner)[1]}")
    first = {f: client.get(f"/api/schema/?format={f}") for f in ("yaml", "json")}
    assert len(SchemaView._rendered) == 2
    for fmt, answer in first.items():
        again = client.get(f"/api/schema/?format={fmt}")
        assert again.content == answer.content and again["Content-Type"] == answer["Content-Type"]
    assert first["json"]["Content-Type"].startswith("application/vnd.oai.openapi+json")
    assert json.loads(first["json"].content)["openapi"].startswith("3.")
    assert first["yaml"].content.startswith(b"openapi: 3.")
    assert Client().get("/api/schema/").status_code in (401, 403)  # refusals are not cached


def test_the_reference_page_loads_swagger_ui_from_this_origin(teammate_client):
    page = teammate_client.get("/api/docs/").content.decode()
    assert 'data-schema-url="/api/schema/?format=json"' in page
    sources = re.findall(r'<(?:script src|link rel="stylesheet" href)="([^"]+)"', page)
    assert sources and all(src.startswith("/static/") for src in sources), sources
    assert "<script>" not in page and "style=" not in page
    # The vendored files are found by the static files finders (no CDN, no npm step).
    assert finders.find("drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")
    assert finders.find("drf_spectacular_sidecar/swagger-ui-dist/swagger-ui.css")


def test_a_browser_asking_for_runs_gets_a_page_with_the_json_not_406(teammate_client):
    Run.objects.create(name="llama <b>70b</b>")
    response = teammate_client.get("/api/runs/", HTTP_ACCEPT=BROWSER)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert "llama &lt;b&gt;70b&lt;/b&gt;" in page and "<b>70b" not in page
    assert 'href="/"' in page  # the runs page
    assert 'href="/api/docs/"' in page and 'href="/api/runs/?format=json"' in page


def test_the_page_links_the_object_the_answer_is_about(teammate_client):
    run = Run.objects.create(name="job")
    page = teammate_client.get(f"/api/runs/{run.pk}/", HTTP_ACCEPT=BROWSER).content.decode()
    assert f'href="/runs/{run.pk}/"' in page
    compare = teammate_client.get("/api/compare/?a=1&b=2", HTTP_ACCEPT=BROWSER)
    assert compare.status_code == 404 and 'href="/compare/?a=1&amp;b=2"' in compare.content.decode()


@pytest.mark.parametrize("accept", [None, "*/*", "application/json"])
def test_programs_still_get_json(teammate_client, accept):
    Run.objects.create(name="job")
    headers = {"HTTP_ACCEPT": accept} if accept else {}
    response = teammate_client.get("/api/runs/", **headers)
    assert response["Content-Type"] == "application/json"
    assert response.json()[0]["name"] == "job"


def test_an_anonymous_browser_gets_a_401_page_that_offers_to_log_in(client):
    response = client.get("/api/runs/", HTTP_ACCEPT=BROWSER)
    assert response.status_code == 401 and response["Content-Type"].startswith("text/html")
    assert 'href="/accounts/login/?next=/api/runs/"' in response.content.decode()
    assert "job" not in response.content.decode()


def test_a_long_answer_is_cut_on_the_page_and_whole_as_json(teammate_client, monkeypatch):
    monkeypatch.setattr("config.api_html.MAX_SHOWN_CHARS", 50)
    for i in range(5):
        Run.objects.create(name=f"run-{i}")
    page = teammate_client.get("/api/runs/", HTTP_ACCEPT=BROWSER).content.decode()
    shown = html.unescape(re.search(r'<pre class="api-json">(.*?)</pre>', page, re.S).group(1))
    assert "The answer is long" in page and len(shown) == 50
    assert len(teammate_client.get("/api/runs/?format=json").json()) == 5
