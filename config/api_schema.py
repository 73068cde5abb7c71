"""What the OpenAPI schema (drf-spectacular) needs beyond the views' own decorators:
the token header as a security scheme, the answers every endpoint shares (errors),
and the recursive flamegraph node, which serializers cannot express.

Each view documents itself with `extend_schema` (see runs/api_schema.py and
profiles/api/schema.py); tests/config/test_api_schema.py fails on an /api/ path the
schema lacks and on a field without a description.
"""

from typing import Any

from drf_spectacular.extensions import (
    OpenApiAuthenticationExtension,
    OpenApiSerializerFieldExtension,
)
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers

TOKEN_SCHEME = "tokenAuth"  # noqa: S105 - the scheme's name, not a secret


class HashedTokenScheme(OpenApiAuthenticationExtension):
    """`Authorization: Token <key>` (runs.auth.HashedTokenAuthentication)."""

    target_class = "runs.auth.HashedTokenAuthentication"
    name = TOKEN_SCHEME

    def get_security_definition(self, auto_schema) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": (
                "`Authorization: Token <key>` (the word Token, a space, the key). "
                "`manage.py create_api_token USERNAME` prints a key once; keys expire "
                "after FLAMEDECK_TOKEN_DAYS (90) and are revoked with "
                "`manage.py revoke_api_token`. Calls with a token need no CSRF token."
            ),
        }


class StrictIntegerScheme(OpenApiSerializerFieldExtension):
    """config.api_fields' integers: their bounds are part of the contract."""

    target_class = "config.api_fields.StrictIntegerField"

    def map_serializer_field(self, auto_schema, direction) -> dict[str, Any]:
        field = self.target
        return {"type": "integer", "minimum": field.minimum, "maximum": field.maximum}


class StrictFloatScheme(OpenApiSerializerFieldExtension):
    """config.api_fields' numbers, with their bounds."""

    target_class = "config.api_fields.StrictFloatField"

    def map_serializer_field(self, auto_schema, direction) -> dict[str, Any]:
        field = self.target
        return {"type": "number", "minimum": field.minimum, "maximum": field.maximum}


class DetailSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="What went wrong, in one line.")


FIELD_ERRORS: dict[str, Any] = {
    "type": "object",
    "description": "One key per refused field (its name), each a list of reasons; "
    "`detail` when the body itself could not be read (not JSON, nested too deeply).",
    "additionalProperties": {"type": "array", "items": {"type": "string"}},
}


def errors(*codes: int) -> dict[int, OpenApiResponse]:
    """The error answers of an endpoint, by status code."""
    known = {
        400: OpenApiResponse(FIELD_ERRORS, "Refused: the reasons, by field."),
        401: OpenApiResponse(DetailSerializer, "No or a bad token (WWW-Authenticate: Token)."),
        403: OpenApiResponse(
            DetailSerializer, "Not logged in (session), or the permission is missing."
        ),
        404: OpenApiResponse(DetailSerializer, "No such object."),
        409: OpenApiResponse(DetailSerializer, "Conflicts with the object's state."),
        413: OpenApiResponse(DetailSerializer, "Body over FLAMEDECK_MAX_UPLOAD_MB."),
    }
    return {code: known[code] for code in codes}


def combine(*decorators):
    """Several `extend_schema` (one per HTTP method of a function view) as one decorator."""

    def apply(view):
        for decorate in reversed(decorators):
            view = decorate(view)
        return view

    return apply


READ_ERRORS = (401, 403, 404)
WRITE_ERRORS = (400, 401, 403, 404)


def list_and_create(*, tags: list[str], listed, list_summary: str, request, created, **create):
    """GET a list + POST a new one (operation ids `<tag>_list`, `<tag>_create`);
    `create` holds the POST's summary, description and extra responses."""
    more = create.pop("responses", {})
    return combine(
        extend_schema(
            methods=["GET"],
            summary=list_summary,
            operation_id=f"{tags[0]}_list",
            responses={200: listed, **errors(401, 403)},
            tags=tags,
        ),
        extend_schema(
            methods=["POST"],
            request=request,
            responses={201: created, **more, **errors(400, 401, 403)},
            tags=tags,
            **create,
        ),
    )


def read_and_change(*, tags: list[str], shown, read_summary: str, request, **change):
    """GET one + PATCH it; `change` holds the PATCH's summary and description."""
    return combine(
        extend_schema(
            methods=["GET"],
            summary=read_summary,
            responses={200: shown, **errors(*READ_ERRORS)},
            tags=tags,
        ),
        extend_schema(
            methods=["PATCH"],
            request=request,
            responses={200: shown, **errors(*WRITE_ERRORS)},
            tags=tags,
            **change,
        ),
    )


FLAME_NODE_REF = {"$ref": "#/components/schemas/FlameNode"}
FLAME_NODE: dict[str, Any] = {
    "type": "object",
    "description": (
        "A flamegraph node (d3-flame-graph's shape). `value` is inclusive and children "
        "never sum past it; the root `all` holds every sample. Pruned mass is a child "
        "named `[pruned: N frames]` with `pruned_frames`, never hidden self time."
    ),
    "required": ["name", "value", "children"],
    "properties": {
        "name": {
            "type": "string",
            "description": "The frame, `function (file.py:line)` or "
            "`symbol (library.so)`; thread nodes keep py-spy's `thread (TID): NAME`.",
        },
        "value": {"type": "integer", "description": "Samples in this node and below."},
        "children": {
            "type": "array",
            "items": FLAME_NODE_REF,
            "description": "The frames it calls, each a FlameNode.",
        },
        "pruned_frames": {
            "type": "integer",
            "description": "Only on a `[pruned: N frames]` node: the frames it stands for.",
        },
    },
}


@extend_schema_field(FLAME_NODE_REF)
class FlameNodeField(serializers.JSONField):
    """A whole flamegraph tree (FlameNode)."""


# The object a path's `{id}` names, by the path's first segment.
ID_OF = {"groups": "whole-job capture", "processes": "run process"}


def finish(result: dict, generator, request, public) -> dict:
    """Postprocessing hook: the FlameNode component the `$ref`s above point to, and a
    description for `{id}` path parameters (function views name no model)."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas["FlameNode"] = FLAME_NODE
    for path, operations in result.get("paths", {}).items():
        kind = path.split("/")[2]
        for operation in operations.values():
            for param in operation.get("parameters", []):
                if param["in"] == "path" and param["name"] == "id":
                    what = ID_OF.get(kind, kind.rstrip("s"))
                    param.setdefault("description", f"The {what}'s id.")
    _typed_nullable_refs(schemas)
    return result


def _typed_nullable_refs(node: Any) -> None:
    """`{allOf: [$ref], nullable: true}` becomes `{anyOf: [$ref, null]}`: OpenAPI 3.0
    validators apply `nullable` only beside a `type` and check the `$ref`'d object
    even for a null, so a null (no straggler, no lag) would not match a schema that
    says it may be null."""
    if isinstance(node, dict):
        if node.get("nullable") and "allOf" in node and "type" not in node:
            refs = node.pop("allOf")
            node.pop("nullable")
            node["anyOf"] = [*refs, {"type": "object", "nullable": True, "enum": [None]}]
        for value in node.values():
            _typed_nullable_refs(value)
    elif isinstance(node, list):
        for item in node:
            _typed_nullable_refs(item)
