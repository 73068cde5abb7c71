"""The API reference types what the code knows: no free-form object where a shape is
known, no plain string where the values are one of a known set, every operation
described, and the words written for the engine's types all land on a field.

The shapes come from the code (config.api_schema.typed on the engine's TypedDicts, the
models' choices); these tests walk the generated schema so a new field, endpoint or
serializer that falls back to "any object" or "any string" fails here."""

import copy
import json
from pathlib import Path

import pytest
from drf_spectacular.generators import SchemaGenerator
from openapi_schema_validator import OAS30Validator

from config import api_schema
from config.api_schema import RULE
from tests import factories
from tests.config.test_api_schema import _strict, assert_answer_matches
from tests.support.recorded_jobs import record_group

DATA = Path(__file__).resolve().parents[1] / "data"

# Objects that may hold any keys with any values, and why. A map with typed values
# (`{rank: capture id}`, `{state: percent}`) is not free-form and needs no entry here.
FREE_FORM: dict[str, str] = {}

# Property names whose values come from a known set wherever they appear.
ENUM_NAMES = {
    *("status", "state", "verdict", "kind", "severity", "format", "transport", "source"),
    *("direction", "side", "delta_bound", "busy_status", "lag_verdict", "report_status"),
    *("cause", "error_cause", "detected_by", "bound", "rule", "scope", "dominant"),
}
# Plain strings under those names, and why no enum is given.
PLAIN_STRINGS = {
    "error_cause": "an open set: runs.remote.model.Cause plus the pipeline's own causes "
    "(queue_unavailable, time_limit, worker_lost, analysis_lost, …), named where they fail",
    "StacksFailed.cause": "a capture's error_cause (above)",
    "FailedHost.cause": "its ranks' error_cause (above)",
    "rule": "finding rules live in rules/findings.RULES, job/report.py, job/straggler.py and "
    "timed/periodic_stalls.py; "
    "no one type lists them (docs/findings.md does)",
    "DumpThread.status": "py-spy's own bracket text; the engine types it as str",
    "detected_by": "rules/step_threads.py's ways and job/report.py's `peers`; typed str",
    "MovedRow.bound": "regression.Row types it str (exact, before below, after below)",
    "Judgement.scope": "judging.py writes `step threads`, `all threads` or empty; no constant",
}


@pytest.fixture(scope="module")
def spec():
    return SchemaGenerator().get_schema(request=None, public=True)


def _schemas(spec):
    """(where, schema) of every schema node: components, then the operations' own."""
    for name, schema in spec["components"]["schemas"].items():
        yield from _walk(schema, name)
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            found = [p.get("schema", {}) for p in operation.get("parameters", [])]
            for part in ("requestBody", "responses"):
                found += _content_schemas(operation.get(part, {}))
            for schema in found:
                yield from _walk(schema, f"{method.upper()} {path}")


def _content_schemas(node):
    if isinstance(node, dict):
        if "schema" in node:
            yield node["schema"]
        for value in node.values():
            yield from _content_schemas(value)


def _walk(schema, where):
    if schema.get(RULE):  # a rule between fields restates them (config.api_schema.RULE)
        return
    yield where, schema
    for name, prop in (schema.get("properties") or {}).items():
        yield from _walk(prop, f"{where}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from _walk(schema["items"], f"{where}[]")
    if isinstance(schema.get("additionalProperties"), dict) and schema["additionalProperties"]:
        yield from _walk(schema["additionalProperties"], f"{where}{{}}")
    for key in ("allOf", "anyOf", "oneOf"):
        for sub in schema.get(key, []):
            yield from _walk(sub, where)


def free_form(spec) -> list[str]:
    """Objects without properties whose values may be anything, and untyped values."""
    found = []
    for where, schema in _schemas(spec):
        if schema.get("enum") == [None]:  # the null of a nullable $ref
            continue
        kind, extra = schema.get("type"), schema.get("additionalProperties")
        closed = schema.get("properties") or isinstance(extra, dict) and extra or extra is False
        composed = {"$ref", "allOf", "anyOf", "oneOf", "enum"} & schema.keys()
        if (kind == "object" and not closed) or (kind is None and not composed and not closed):
            found.append(where)
    return sorted(set(found) - set(FREE_FORM))


def plain_strings(spec) -> list[str]:
    """Properties named in ENUM_NAMES that are a string without an enum."""
    found = []
    for name, schema in spec["components"]["schemas"].items():
        for field, prop in (schema.get("properties") or {}).items():
            if field in ENUM_NAMES and prop.get("type") == "string" and "enum" not in prop:
                if field not in PLAIN_STRINGS and f"{name}.{field}" not in PLAIN_STRINGS:
                    found.append(f"{name}.{field}")
    return found


def test_no_schema_is_a_free_form_object(spec):
    found = free_form(spec)
    assert not found, (
        "free-form (give the type: a TypedDict via config.api_schema.typed, a serializer, "
        "or a typed map):\n" + "\n".join(found)
    )


def test_no_plain_string_where_the_values_are_known(spec):
    found = plain_strings(spec)
    assert not found, (
        "a string where the code knows the values (a Literal, TextChoices, STATES): "
        "make it a ChoiceField or a Literal hint, or say why in PLAIN_STRINGS:\n" + "\n".join(found)
    )


def test_the_walker_finds_free_form_objects_and_plain_strings():
    spec = {
        "components": {
            "schemas": {
                "Row": {
                    "type": "object",
                    "properties": {
                        "extra": {"type": "object", "additionalProperties": {}},
                        "anything": {"description": "Any JSON."},
                        "shares": {"type": "object", "additionalProperties": {"type": "number"}},
                        "status": {"type": "string"},
                        "rule": {"type": "string"},
                    },
                }
            }
        },
        "paths": {"/x/": {"get": {"responses": {"200": {"content": {"j": {"schema": {}}}}}}}},
    }
    assert free_form(spec) == ["GET /x/", "Row.anything", "Row.extra"]
    assert plain_strings(spec) == ["Row.status"]


def test_every_enum_names_its_values_from_the_code(spec):
    """Every enum component is one of ENUM_NAME_OVERRIDES' (the code's constants) or
    one field's own, never a hash-suffixed collision."""
    names = [n for n, s in spec["components"]["schemas"].items() if "enum" in s]
    assert "ThreadStateEnum" in names and "CaptureStatusEnum" in names
    assert not [n for n in names if any(c.isdigit() for c in n)], names


def test_every_operation_has_a_summary_and_a_description(spec):
    bare = [
        f"{method.upper()} {path}"
        for path, operations in spec["paths"].items()
        for method, operation in operations.items()
        if not (operation.get("summary") and operation.get("description"))
    ]
    assert not bare, "without a summary and a description:\n" + "\n".join(bare)


def test_every_text_written_for_a_type_describes_one_of_its_fields(spec):
    """A text for a field the type no longer has, or one its docstring already
    describes (the docstring wins), is a leftover."""
    assert api_schema.UNUSED_TEXTS == []


def test_the_engine_types_shape_the_components(spec):
    schemas = spec["components"]["schemas"]
    assert schemas["FlameNode"]["properties"]["children"]["items"] == {
        "$ref": "#/components/schemas/FlameNode"
    }
    assert "pruned_frames" not in schemas["FlameNode"]["required"]
    tid = schemas["ThreadStat"]["properties"]["tid"]
    assert tid["oneOf"] == [{"type": "integer"}, {"type": "string"}]
    # A field's docstring in profiles/pyspy/core/types.py is its description.
    assert (
        "nearest user-code frame"
        in schemas["KeywordStat"]["properties"]["user_callers"]["description"]
    )


def _golden(pattern: str):
    return [(p.relative_to(DATA), json.loads(p.read_text())) for p in sorted(DATA.glob(pattern))]


def _mismatches(spec, component: str, value, where) -> list[str]:
    components = _strict(copy.deepcopy(spec["components"]))
    validator = OAS30Validator(
        {"$ref": f"#/components/schemas/{component}", "components": components}
    )
    return [
        f"{where} as {component}: {'/'.join(map(str, e.absolute_path))}: {e.message[:200]}"
        for e in validator.iter_errors(value)
    ]


def test_the_engines_golden_outputs_match_the_components_built_from_its_types(spec):
    """What the engine really writes (its golden files) against what `typed` made of
    its TypedDicts: a type that drifts from the engine's output fails here."""
    wrong, seen = [], 0
    for where, stats in _golden("pyspy/*.expected.json"):
        if isinstance(stats, dict) and "total_samples" in stats:
            if "flamegraph" in stats:
                wrong += _mismatches(spec, "FlameNode", stats.pop("flamegraph"), where)
            component = "Sandwich" if "callers" in stats else "Stats"
            wrong += _mismatches(spec, component, stats, where)
            seen += 1
    for where, report in _golden("jobs/*/job.expected.json"):
        for component, items in (("JobClass", report["classes"]), ("Finding", report["findings"])):
            for item in items:
                wrong += _mismatches(spec, component, item, where)
        if report["straggler"] is not None:
            wrong += _mismatches(spec, "Straggler", report["straggler"], where)
        seen += 1
    for where, stacks in _golden("dumps/*/stacks.expected.json"):
        wrong += _mismatches(spec, "Stacks", {"failed": [], **stacks}, where)
        seen += 1
    assert seen >= 40 and not wrong, "\n".join(wrong[:20])


@pytest.mark.django_db
def test_whole_job_answers_have_the_shapes_the_schema_gives(spec, monkeypatch, owner_client):
    """The answers the capture test does not reach: a recorded job's report, live page
    and compare (real recordings through the real pipeline), and a whole-job dump."""
    before, _ = record_group(monkeypatch, "balanced", run_name="gloo-job")
    after, _ = record_group(monkeypatch, "straggler", run_name="gloo-job-2")
    rank = after.captures.first()
    dump = factories.whole_job_dump(
        factories.run("hung-job"), {"rank-0": [[factories.dump_thread(["step (train.py:9)"])]] * 2}
    )
    calls = [
        (f"/api/groups/{after.pk}/", "/api/groups/{id}/"),
        (f"/api/groups/{after.pk}/live/", "/api/groups/{id}/live/"),
        (f"/api/captures/{rank.pk}/", "/api/captures/{id}/"),
        (f"/api/compare/groups/?a={before.pk}&b={after.pk}", "/api/compare/groups/"),
        (f"/api/groups/{dump.pk}/", "/api/groups/{id}/"),
        (f"/api/groups/{dump.pk}/live/", "/api/groups/{id}/live/"),
        (f"/api/captures/{dump.captures.first().pk}/", "/api/captures/{id}/"),
    ]
    for url, path in calls:
        assert_answer_matches(spec, owner_client, "get", url, path)
    for group in (after, dump):  # the report variants, not the "not ready yet" one
        assert owner_client.get(f"/api/groups/{group.pk}/live/").json()["report"]["ready"]
