"""Who may do what, for every URL the resolver knows (URLs added later included).

- Anonymous: every URL but the login page sends to log in (pages, the API reference
  page included) or answers 401/403 (API); nothing answers 200.
- Viewer (no permissions): every write (POST, PUT, PATCH, DELETE) is refused with
  403 or 405, except commenting, logging in or out, and refreshing a run's liveness
  marks (`run_check`: one bounded, rate-limited `ps` per host that changes nothing but
  the cached alive flags; documented under Permissions).
- Operator: may not create hosts or change how they are reached (host admins only).
"""

import pytest
from django.test import Client

from runs.models import Host
from tests.test_error_corpus import real_urls, world  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db

PUBLIC = {"login"}
API_PAGES = {"docs"}  # /api/docs/ is a page for people (Swagger UI), not an endpoint
VIEWER_MAY_WRITE = {"login", "logout", "capture_comment", "run_check"}
WRITES = ["post", "put", "patch", "delete"]


def test_anonymous_visitors_get_nothing_anywhere(world):  # noqa: F811
    client = Client()
    checked = 0
    for url, name, _route in real_urls(world["ids"]):
        if name in PUBLIC:
            continue
        for method in ["get", *WRITES]:
            response = getattr(client, method)(url)
            checked += 1
            if url.startswith("/api/") and name not in API_PAGES:
                assert response.status_code in (401, 403), (method, url)
            else:
                assert response.status_code in (302, 403, 405), (method, url)
                if response.status_code == 302:
                    assert "login" in response["Location"], (method, url)
    print(f"\nauth matrix, anonymous: {checked} requests")
    assert checked > 100


def test_a_viewer_writes_nothing_but_comments(client, teammate, world):  # noqa: F811
    client.force_login(teammate)
    checked = 0
    for url, name, route in real_urls(world["ids"]):
        if name in VIEWER_MAY_WRITE:
            continue
        for method in WRITES:
            response = getattr(client, method)(url, {"name": "x", "pid": 5, "host": 1})
            checked += 1
            if route.startswith("admin/"):
                assert response.status_code in (302, 403, 404, 405), (method, url)
            else:
                assert response.status_code in (403, 405), (method, url, response.status_code)
    print(f"\nauth matrix, viewer writes: {checked} requests")
    assert Host.objects.count() == 2  # local and the fixture's, unchanged


def test_an_operator_cannot_add_or_rewire_hosts_on_any_path(client, owner, world):  # noqa: F811
    client.force_login(owner)
    host = world["host"]
    body = {"name": "new", "transport": "ssh", "address": "new.lan", "py_spy": "py-spy"}
    assert client.post("/hosts/new/", body).status_code == 403
    assert client.post("/api/hosts/", body, content_type="application/json").status_code == 403
    patch = {"exec_prefix": "sh -c id --"}
    url = f"/api/hosts/{host.pk}/"
    assert client.patch(url, patch, content_type="application/json").status_code == 403
    owner.is_staff = True
    owner.save()
    assert client.get("/admin/runs/host/add/").status_code == 403
    assert not Host.objects.filter(name="new").exists()
    assert Host.objects.get(pk=host.pk).exec_prefix == ""
