"""The rules between a body's fields are in the schema exactly as the server enforces
them (issue 49): for each, bodies at and past the rule's edge are valid for the schema
exactly when the server takes them. And the schema's links chain a launcher's calls."""

import math
import re

import pytest
from drf_spectacular.generators import SchemaGenerator
from openapi_schema_validator import OAS30Validator

from config.api_fields import NOT_BLANK
from profiles.watches.api import _rank_problem
from runs.capture_serializers import MAX_DUMP_SPAN_S, JobCaptureSettingsSerializer
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def spec():
    return SchemaGenerator().get_schema(request=None, public=True)


def valid(spec, component: str, body: dict) -> bool:
    schema = {"$ref": f"#/components/schemas/{component}", "components": spec["components"]}
    return OAS30Validator(schema).is_valid(body)


def job_bodies():
    """Dump spans at, and just past, (repeat - 1) x interval = MAX_DUMP_SPAN_S."""
    for repeat in range(2, 11):
        edge = MAX_DUMP_SPAN_S / (repeat - 1)
        yield {"kind": "dump", "repeat": repeat, "interval": edge}
        if edge < 30:
            yield {"kind": "dump", "repeat": repeat, "interval": math.nextafter(edge, 31)}
    yield {"kind": "dump", "interval": 15.0}  # repeat's default is 3
    yield {"kind": "dump", "interval": 15.5}
    yield {"kind": "dump", "repeat": 1, "interval": 30}
    # native (on by default) with nonblocking: py-spy refuses a record, not a dump.
    yield {"nonblocking": True}
    yield {"nonblocking": True, "native": False}
    yield {"nonblocking": True, "native": True, "kind": "dump"}
    yield {"nonblocking": False}


@pytest.mark.parametrize("body", list(job_bodies()), ids=str)
def test_a_whole_job_capture_body_is_valid_exactly_when_the_server_takes_it(spec, body):
    taken = JobCaptureSettingsSerializer(data=body).is_valid()
    assert valid(spec, "JobCaptureSettingsRequest", body) == taken, body


REMEMBERED = [
    {}, {"nonblocking": True}, {"nonblocking": True, "native": False}, {"duration": 5},
    {"dump_locals": True}, {"settings": 1},
]  # fmt: skip


@pytest.mark.parametrize("body", REMEMBERED, ids=str)
def test_remembered_settings_are_valid_exactly_when_the_server_takes_them(spec, owner_client, body):
    url = f"/api/runs/{factories.run('llama').pk}/"
    change = {"capture_settings": body}
    response = owner_client.patch(url, change, content_type="application/json")
    assert response.status_code in (200, 400), response.content
    assert valid(spec, "PatchedRunChangeRequest", change) == (response.status_code == 200), body


RANKS = [
    {"process": 1}, {"run": 1, "role": "rank-0"}, {"run": 1, "all_roles": True},
    {"run": 1, "all_roles": True, "role": ""}, {"run": 1}, {"run": 1, "role": ""},
    {"process": 1, "run": 1}, {"process": 1, "role": "rank-0"}, {"role": "rank-0"},
    {"run": 1, "role": "rank-0", "all_roles": True}, {"process": 1, "all_roles": True},
    {"process": 1, "all_roles": False}, {"run": 1, "role": "r", "all_roles": False},
]  # fmt: skip


@pytest.mark.parametrize("rank", RANKS, ids=str)
def test_a_watch_names_its_rank_as_the_schema_says(spec, rank):
    body = {"baseline": 1, **rank}
    assert valid(spec, "WatchCreateRequest", body) == (_rank_problem(body) is None), body


HOSTS = [
    ({"name": "a"}, 400),
    ({"name": "a", "address": "gpu-1"}, 201),
    ({"name": "a", "transport": "ssh"}, 400),
    ({"name": "a", "transport": "local"}, 201),
    ({"name": "a", "transport": "local", "exec_prefix": "docker exec t"}, 400),
    ({"name": "a", "transport": "local", "py_spy": "/opt/py-spy"}, 400),
    ({"name": "a", "transport": "local", "py_spy": "py-spy", "exec_prefix": ""}, 201),
]


@pytest.mark.parametrize(("body", "status"), HOSTS, ids=str)
def test_a_new_host_is_valid_exactly_when_the_server_takes_it(
    spec, host_admin_client, body, status
):
    response = host_admin_client.post("/api/hosts/", body, content_type="application/json")
    assert response.status_code == status, response.content
    assert valid(spec, "HostRequest", body) == (status == 201)


def patterns(node) -> list[str]:
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in ([v] if k == "pattern" else patterns(v))]
    return [p for v in node for p in patterns(v)] if isinstance(node, list) else []


def test_blank_is_the_same_white_space_for_the_schema_and_the_server(spec, host_admin_client):
    # `\s` is not one class: Python's re takes \x1c-\x1f, ECMA-262 (the schema's readers,
    # a client's generator) U+FEFF instead; a name of one \x1e passed one and not the other.
    assert patterns(spec) and not [p for p in patterns(spec) if re.search(r"\\[sS]", p)]
    characters = [chr(c) for c in range(0x110000)]
    blank = {c for c in characters if not re.fullmatch(NOT_BLANK, c)}
    assert blank == {c for c in characters if c.isspace()} | {"\x00"}
    for name in ("\x1e", "\u3000", " \x1c\t"):
        body = {"name": name, "transport": "local"}
        assert not valid(spec, "HostRequest", body)
        response = host_admin_client.post("/api/hosts/", body, content_type="application/json")
        assert response.status_code == 400 and "name" in response.json()
        capture = {"host": name, "pid": 1}  # a name or an id (NameOrIdField)
        assert not valid(spec, "CaptureRequestRequest", capture)
        response = host_admin_client.post(
            "/api/captures/", capture, content_type="application/json"
        )
        assert response.status_code == 400 and "host" in response.json()
    body = {"name": "\ufeffa", "transport": "local"}  # not white space in Python
    assert valid(spec, "HostRequest", body)
    response = host_admin_client.post("/api/hosts/", body, content_type="application/json")
    assert response.status_code == 201


def test_a_change_the_stored_local_host_refuses_is_a_409_not_a_400(spec, host_admin_client):
    from runs.models import Host

    local = Host.objects.get(name="local")
    url = f"/api/hosts/{local.pk}/"
    change = {"exec_prefix": "docker exec trainer"}  # valid: the body does not say local
    assert valid(spec, "PatchedHostRequest", change)
    response = host_admin_client.patch(url, change, content_type="application/json")
    assert response.status_code == 409 and "exec prefix" in response.json()["detail"]
    said = {"transport": "local", **change}
    assert not valid(spec, "PatchedHostRequest", said)
    assert host_admin_client.patch(url, said, content_type="application/json").status_code == 400


def test_a_body_the_server_cannot_do_without_is_required(spec):
    bodies = {
        operation["operationId"]: operation["requestBody"].get("required", False)
        for operations in spec["paths"].values()
        for operation in operations.values()
        if "requestBody" in operation
    }
    assert bodies["captures_create"] and bodies["register_create"]
    assert not bodies["runs_capture_create"]  # an empty body takes every default


def _link(spec, operation_id: str, status: str, name: str) -> dict:
    for operations in spec["paths"].values():
        for operation in operations.values():
            if operation["operationId"] == operation_id:
                return operation["responses"][status]["links"][name]
    raise KeyError(operation_id)


def test_links_chain_a_run_a_rank_a_whole_job_capture_its_group_and_a_compare(spec):
    """POST /api/runs/ → register (or attach) → capture all → the group → compare."""
    register = _link(spec, "runs_create", "201", "Register")
    assert register == {**register, "operationId": "register_create",
                        "requestBody": {"run": "$response.body#/name"}}  # fmt: skip
    assert _link(spec, "runs_create", "201", "Attach")["operationId"] == "runs_processes_create"
    for status in ("200", "201"):
        capture = _link(spec, "register_create", status, "CaptureAll")
        assert capture["parameters"] == {"path.id": "$response.body#/run/id"}
        attached = _link(spec, "runs_processes_create", status, "CaptureAll")
        assert attached["parameters"] == {"path.id": "$request.path.id"}
    group = _link(spec, "runs_capture_create", "201", "Group")
    assert (group["operationId"], group["parameters"]) == (
        "groups_retrieve", {"path.id": "$response.body#/id"}
    )  # fmt: skip
    compare = _link(spec, "groups_retrieve", "200", "Compare")
    assert (compare["operationId"], compare["parameters"]) == (
        "compare_groups_retrieve", {"query.a": "$response.body#/id"}
    )  # fmt: skip
    again = _link(spec, "groups_retrieve", "200", "CaptureAgain")
    assert again["parameters"] == {"path.id": "$response.body#/run"}
