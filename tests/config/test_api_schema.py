"""The API reference: `/api/schema/` is valid OpenAPI 3, names every endpoint the URL
resolver has under /api/ (endpoints added later included) with every method, describes
every field and parameter, and real answers have the shapes it promises."""

import copy
import os
import re

import pytest
from django.core.management import call_command
from django.test import override_settings
from django.urls import URLPattern, URLResolver, get_resolver, include
from django.urls import path as route
from drf_spectacular.generators import SchemaGenerator
from openapi_schema_validator import OAS30Validator
from openapi_spec_validator import validate
from rest_framework.response import Response

from config.api import api
from config.api_schema import RULE
from profiles.jobs.services import capture_group_create
from runs.models import Host, Run, RunProcess
from tests.profiles.web.test_views import imported

pytestmark = pytest.mark.django_db

# Not endpoints of the API but the reference itself (the schema and its page).
NOT_IN_SCHEMA = {"api:schema", "api:docs"}
HOW_TO = (
    "describe it with drf-spectacular's extend_schema (summary, request, responses "
    "with described fields), as runs/api_schema.py and profiles/api/schema.py do"
)


@pytest.fixture(scope="module")
def spec():
    return SchemaGenerator().get_schema(request=None, public=True)


def api_endpoints(resolver=None, prefix: str = "", namespace: str = ""):
    """(OpenAPI path, url name, view) of every URL pattern under /api/."""
    for entry in (resolver or get_resolver()).url_patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            inner = ":".join(n for n in (namespace, entry.namespace) if n)
            yield from api_endpoints(entry, route, inner)
        elif isinstance(entry, URLPattern) and route.startswith("api/"):
            # drf-spectacular writes <int:pk> as {id} (SCHEMA_COERCE_PATH_PK).
            path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", "/" + route).replace("{pk}", "{id}")
            yield path, f"{namespace}:{entry.name}", entry.callback


def _methods(view) -> list[str]:
    declared = getattr(getattr(view, "cls", None), "http_method_names", ["get"])
    return [m for m in declared if m not in ("options", "head", "trace")]


def test_the_schema_is_valid_openapi_3_and_generates_without_a_warning(spec, tmp_path):
    validate(spec)
    assert spec["openapi"].startswith("3.")
    # drf-spectacular's own checks: a view it cannot describe is a warning or an error.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", tmp_path / "s.yaml")


def undocumented(spec) -> tuple[list[str], int]:
    """Operations of /api/ URLs the schema lacks (or has without a summary), and how
    many operations were looked at."""
    missing, seen = [], 0
    for path, name, view in api_endpoints():
        if name in NOT_IN_SCHEMA:
            continue
        operations = spec["paths"].get(path, {})
        for method in _methods(view):
            seen += 1
            if not operations.get(method, {}).get("summary"):
                missing.append(f"{method.upper()} {path} ({name}) has no schema")
    return missing, seen


def test_every_endpoint_under_api_is_in_the_schema_with_every_method(spec):
    missing, seen = undocumented(spec)
    assert not missing, "\n".join(missing) + f"\n-> {HOW_TO}"
    assert seen >= 27


@api(["GET", "DELETE"])
def _undocumented_view(request, pk: int):
    return Response({})


urlpatterns = [
    route("api/extra/<int:pk>/", _undocumented_view, name="extra"),
    route("", include("config.urls")),
]


@override_settings(ROOT_URLCONF=__name__)
def test_an_endpoint_added_without_a_schema_is_named_with_what_to_do():
    spec = SchemaGenerator().get_schema(request=None, public=True)
    missing, _ = undocumented(spec)
    assert sorted(missing) == [
        "DELETE /api/extra/{id}/ (:extra) has no schema",
        "GET /api/extra/{id}/ (:extra) has no schema",
    ]


def _properties(node, where: str):
    """(where, name, property) of every object property in a schema, nested included
    (not the fields a rule between fields restates: config.api_schema.RULE)."""
    if isinstance(node, dict) and not node.get(RULE):
        for name, prop in (node.get("properties") or {}).items():
            yield f"{where}.{name}", prop
        for key, value in node.items():
            yield from _properties(value, f"{where}.{key}" if key != "properties" else where)
    elif isinstance(node, list):
        for item in node:
            yield from _properties(item, where)


def test_every_field_and_parameter_is_described(spec):
    bare = [
        w for w, p in _properties(spec["components"]["schemas"], "") if not p.get("description")
    ]
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            bare += [
                f"{method.upper()} {path} ?{p['name']}"
                for p in operation.get("parameters", [])
                if not p.get("description")
            ]
    assert not bare, "without a description:\n" + "\n".join(bare) + f"\n-> {HOW_TO}"


def test_the_token_header_is_a_security_scheme_every_operation_accepts(spec):
    scheme = spec["components"]["securitySchemes"]["tokenAuth"]
    assert scheme == {**scheme, "type": "apiKey", "in": "header", "name": "Authorization"}
    assert "Token <key>" in scheme["description"]
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            assert {"tokenAuth": []} in operation["security"], (method, path)


def _strict(node):
    """Objects with listed properties admit no other: an answer's undescribed field fails."""
    if isinstance(node, dict):
        if "properties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
        for value in node.values():
            _strict(value)
    elif isinstance(node, list):
        for item in node:
            _strict(item)
    return node


def assert_answer_matches(spec, client, method: str, url: str, path: str, **body):
    """The answer to `method url` has the shape the schema gives `path`, nothing more."""
    response = getattr(client, method)(url, body, content_type="application/json")
    assert response.status_code < 300, (url, response.status_code, response.content[:300])
    code = str(response.status_code)
    content = spec["paths"][path][method]["responses"][code]["content"]["application/json"]
    components = _strict(copy.deepcopy(spec["components"]))
    validator = OAS30Validator({**content["schema"], "components": components})
    errors = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator.iter_errors(response.json())
    ]
    assert not errors, f"{method.upper()} {url} does not match the schema of {path}:\n" + "\n".join(
        errors[:20]
    )


def test_real_answers_have_the_shapes_the_schema_gives(spec, owner, owner_client, host_admin):
    run = Run.objects.create(name="job")
    host = Host.objects.create(name="gpu-1", address="gpu-1.lan")
    RunProcess.objects.create(run=run, host=host, pid=4242, role="rank-0")
    RunProcess.objects.create(run=run, host=host, pid=4243, role="rank-1", layout={"pp": 1})
    local = Host.objects.get(name="local")
    done = imported(owner, run=run)
    group = capture_group_create(user=owner, run=run, duration=1, rate=10)
    other = imported(owner, run=run)
    frame = done.stats["top_self"][0]["frame"]
    calls = [
        ("get", "/api/", "/api/"),
        ("get", "/api/hosts/", "/api/hosts/"),
        ("get", f"/api/hosts/{host.pk}/", "/api/hosts/{id}/"),
        ("get", "/api/runs/", "/api/runs/"),
        ("get", f"/api/runs/{run.pk}/", "/api/runs/{id}/"),
        ("get", f"/api/runs/{run.pk}/processes/", "/api/runs/{id}/processes/"),
        ("get", "/api/captures/", "/api/captures/"),
        ("get", f"/api/captures/{done.pk}/", "/api/captures/{id}/"),
        ("get", f"/api/captures/{done.pk}/?thread=MainThread", "/api/captures/{id}/"),
        ("get", f"/api/captures/{done.pk}/flamegraph/", "/api/captures/{id}/flamegraph/"),
        ("get", f"/api/captures/{done.pk}/sandwich/?frame={frame}", "/api/captures/{id}/sandwich/"),
        ("get", f"/api/groups/{group.pk}/", "/api/groups/{id}/"),
        ("get", f"/api/groups/{group.pk}/live/", "/api/groups/{id}/live/"),
        ("get", f"/api/compare/?a={done.pk}&b={other.pk}", "/api/compare/"),
    ]
    for method, url, path in calls:
        assert_answer_matches(spec, owner_client, method, url, path)
    # A process that is alive on the local host: this test's own.
    register = {"run": "job-2", "host": "local", "pid": os.getpid(), "role": "rank-0"}
    register["layout"] = {"dp": 1, "tp": 0, "pp": 3}
    assert_answer_matches(
        spec, owner_client, "post", "/api/register/", "/api/register/", **register
    )
    owner_client.force_login(host_admin)
    assert_answer_matches(
        spec, owner_client, "post", f"/api/hosts/{local.pk}/check/", "/api/hosts/{id}/check/"
    )
