"""What the OpenAPI schema (drf-spectacular) needs beyond the views' own decorators:
the token header as a security scheme, the answers every endpoint shares (errors),
and `typed`, which makes answer components from the code's own types (the engine's
TypedDicts, dataclasses) so their shapes are not written twice.

Each view documents itself with `extend_schema` (see runs/api_schema.py and
profiles/api/schema.py); tests/config/test_api_schema.py fails on an /api/ path the
schema lacks, a field without a description or an answer the schema does not match,
tests/config/test_api_schema_types.py on a free-form object or a plain string where
the values are known.
"""

import ast
import dataclasses
import functools
import inspect
import operator
import textwrap
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from django.db.models import Choices
from drf_spectacular.extensions import (
    OpenApiAuthenticationExtension,
    OpenApiSerializerExtension,
    OpenApiSerializerFieldExtension,
)
from drf_spectacular.plumbing import resolve_type_hint
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers

from config.api_fields import NOT_BLANK
from config.api_links import add_links

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
                "`Authorization: Token <key>`: the prefix is the word `Token` (not "
                '`Bearer`: a generated client needs it set, `prefix="Token"`), a space, '
                "the key. "
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


class NameOrIdScheme(OpenApiSerializerFieldExtension):
    """config.api_fields.NameOrIdField: a name (not blank, no NUL) or an id."""

    target_class = "config.api_fields.NameOrIdField"

    def map_serializer_field(self, auto_schema, direction) -> dict[str, Any]:
        name = {"type": "string", "minLength": 1, "maxLength": self.target.max_length}
        name["pattern"] = NOT_BLANK  # white space spelled out: no `\S`, read two ways
        return {"oneOf": [name, {"type": "integer", "minimum": 1, "maximum": 2**63 - 1}]}


NO_NUL = r"^[^\x00]*$"
# Where a request body's rules between fields wait for `finish`: drf-spectacular's enum
# hook would make each one-value enum in them (`transport: local`) a component. Each
# rule is marked RULE: its `properties` restate fields described beside the rule.
RULES, RULE = "x-rules", "x-rule"


class StrictJSONScheme(OpenApiSerializerExtension):
    """A request body of config.api_fields.StrictJSON: its own rules (`closed`,
    `max_properties`, `one_of`) in its schema, as it enforces them."""

    target_class = "config.api_fields.StrictJSON"
    match_subclasses = True

    def map_serializer(self, auto_schema, direction) -> dict[str, Any]:
        schema = auto_schema._map_basic_serializer(self.target, direction)
        own = [c for c in type(self.target).__mro__ if "__doc__" in vars(c) and c.__doc__]
        if own and own[0].__module__ == "config.api_fields":  # the mixin's words, not its
            schema.pop("description", None)
        if direction != "request":
            # A request's rules are not a stored value's: a run's step threads typed on
            # the form may be any printable text.
            for name, prop in schema.get("properties", {}).items():
                blank_or = [p for p in prop.get("oneOf", []) if "pattern" in p]
                if blank_or:  # drf-spectacular's oneOf [pattern, blank]: a plain string
                    schema["properties"][name] = {
                        "type": "string",
                        "description": prop.get("description", ""),
                        **(
                            {"maxLength": blank_or[0]["maxLength"]}
                            if "maxLength" in blank_or[0]
                            else {}
                        ),
                    }
                elif prop.get("type") == "string":
                    prop.pop("pattern", None)
            return schema
        for name, field in self.target.fields.items():
            prop = schema.get("properties", {}).get(name, {})
            if isinstance(field, serializers.ListField):  # a list of texts: each item's
                field, prop = field.child, prop.get("items", {})
            text = isinstance(field, serializers.CharField) and prop.get("type") == "string"
            if text and "pattern" not in prop:
                prop["pattern"] = NO_NUL  # DRF refuses NUL in text (PostgreSQL cannot hold it)
        if self.target.closed:
            schema["additionalProperties"] = False
        if self.target.max_properties is not None:
            schema["maxProperties"] = self.target.max_properties
        rules = self.target.schema_rules(partial=auto_schema.method == "PATCH")
        if rules:
            schema[RULES] = rules  # `allOf` once drf-spectacular's enum hook has run (finish)
        groups = self.target.one_of
        if groups:
            props = schema.get("properties", {})
            schema["oneOf"] = [
                {
                    "type": "object",
                    "properties": {f: props[f] for f in group},
                    "required": list(group),
                    "not": {"anyOf": [{"required": [f]} for g in groups if g != group for f in g]},
                }
                for group in groups
            ]
        return schema


class DetailSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="What went wrong, in one line.")


FIELD_ERRORS: dict[str, Any] = {
    "type": "object",
    "description": "`detail` says the first problem in one line; each refused field (a "
    "nested one by its dotted path, `layout.dp`, `notify.2`; `non_field_errors` for the "
    "body as a whole) has its reasons as a list of strings (config.api_errors).",
    "properties": {"detail": {"type": "string", "description": "The first problem, in one line."}},
    "required": ["detail"],
    "additionalProperties": {"type": "array", "items": {"type": "string"}},
}


def errors(*codes: int) -> dict[int, OpenApiResponse]:
    """The error answers of an endpoint, by status code (config.api_errors writes them)."""
    known = {
        400: OpenApiResponse(FIELD_ERRORS, "Refused: the reasons, by field."),
        401: OpenApiResponse(DetailSerializer, "No or a bad token (WWW-Authenticate: Token)."),
        403: OpenApiResponse(
            DetailSerializer, "Not logged in (session), or the permission is missing."
        ),
        404: OpenApiResponse(
            DetailSerializer, "No such object (the URL's, or one the request names)."
        ),
        409: OpenApiResponse(DetailSerializer, "The objects' state refuses it (the reason)."),
        413: OpenApiResponse(DetailSerializer, "Body over FLAMEDECK_MAX_UPLOAD_MB."),
        415: OpenApiResponse(DetailSerializer, "A body that is not JSON (multipart: imports)."),
    }
    return {code: known[code] for code in codes}


def combine(*decorators):
    """Several `extend_schema` (one per HTTP method of a function view) as one decorator."""

    def apply(view):
        for decorate in reversed(decorators):
            view = decorate(view)
        return view

    return apply


def described(help_texts: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """A ModelSerializer's `extra_kwargs` giving each field its description."""
    return {name: {"help_text": text} for name, text in help_texts.items()}


# A query parameter's id (config.params.parse_id's range).
ID_MAX = 2**63 - 1
ID: dict[str, Any] = {"type": "integer", "minimum": 1, "maximum": ID_MAX}
READ_ERRORS = (401, 403, 404)
WRITE_ERRORS = (400, 401, 403, 404)


def list_and_create(
    *, tags: list[str], listed, list_summary: str, list_description: str, request, created, **create
):
    """GET a list + POST a new one (operation ids `<tag>_list`, `<tag>_create`);
    `create` holds the POST's summary, description and extra responses."""
    more = create.pop("responses", {})
    return combine(
        extend_schema(
            methods=["GET"],
            summary=list_summary,
            description=list_description,
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


def read_and_change(
    *, tags: list[str], shown, read_summary: str, read_description: str, request, **change
):
    """GET one + PATCH it; `change` holds the PATCH's summary and description."""
    return combine(
        extend_schema(
            methods=["GET"],
            summary=read_summary,
            description=read_description,
            responses={200: shown, **errors(*READ_ERRORS)},
            tags=tags,
        ),
        extend_schema(
            methods=["PATCH"],
            request=request,
            responses={200: shown, **change.pop("responses", {}), **errors(*WRITE_ERRORS)},
            tags=tags,
            **change,
        ),
    )


# --- answer shapes from the code's own types -----------------------------------------
# The engine hands its JSON shapes over as TypedDicts (profiles/pyspy/core/types.py); `typed`
# turns one into a serializer for drf-spectacular, field by field from its type hints:
# the fields, their types, enums (Literal, TextChoices), what may be null or missing,
# nested shapes (components of their own). Only the words are written here: a field's
# docstring in the TypedDict when it has one, else the text given for it.

_BUILT: dict[Any, type[serializers.Serializer]] = {}  # TypedDict or name -> its serializer
_BUILDING: dict[Any, str] = {}  # shapes being built -> their component names
UNUSED_TEXTS: list[str] = []  # texts naming no field: tests/config fails on them


def typed(
    shape: Any,
    texts: Mapping[str, str] | None = None,
    *,
    name: str = "",
    hints: Mapping[str, Any] | None = None,
    optional: bool | Iterable[str] = False,
) -> type[serializers.Serializer]:
    """The serializer (component `name`, by default the type's name) of `shape`, a
    TypedDict or a dataclass.

    `hints` replace or add type hints where the TypedDict is looser than the code that
    fills it (a `str` that is one of STATES: `Literal[STATES]`; None leaves a field
    out); `optional`: fields (True: every field) that may be missing from stored
    answers older than the type. A TypedDict met inside is built
    on first use, so build nested shapes with their texts before the shapes holding them.
    """
    name = name or shape.__name__
    if name in _BUILT:
        raise ValueError(f"the component {name} is built twice")
    all_hints = {**typing.get_type_hints(shape, include_extras=True), **(hints or {})}
    all_hints = {field: hint for field, hint in all_hints.items() if hint is not None}
    missing = set(all_hints) if optional is True else set(optional or ())
    docs, texts = _field_docs(shape), dict(texts or {})
    UNUSED_TEXTS.extend(f"{name}.{k}" for k in texts if k not in all_hints or k in docs)
    _BUILDING[shape] = name
    try:
        fields = {
            field: _field(
                hint, help_text=docs.get(field) or texts.get(field), optional=field in missing
            )
            for field, hint in all_hints.items()
        }
    finally:
        del _BUILDING[shape]
    doc = inspect.cleandoc(shape.__doc__ or "")
    built = type(f"{name}Serializer", (serializers.Serializer,), {**fields, "__doc__": doc})
    _BUILT[name] = built
    _BUILT.setdefault(shape, built)
    return built


def shape_of(shape: Any) -> type[serializers.Serializer]:
    """The serializer `typed` built for a type (built now, without texts, if none)."""
    return _BUILT.get(shape) or typed(shape)


def _field(hint: Any, *, optional: bool = False, **kwargs: Any) -> serializers.Field:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.NotRequired:
        return _field(args[0], optional=True, **kwargs)
    if optional:
        kwargs["required"] = False
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        inner = functools.reduce(operator.or_, rest)
        return _field(inner, allow_null=True, **kwargs)
    if origin in (typing.Union, types.UnionType):
        return _annotated(resolve_type_hint(hint))(**kwargs)
    if origin is typing.Literal:
        return serializers.ChoiceField(choices=list(args), **kwargs)
    if inspect.isclass(hint) and issubclass(hint, Choices):
        return serializers.ChoiceField(choices=hint.choices, **kwargs)
    if origin is list and _is_shape(args[0]) and args[0] not in _BUILDING:
        return shape_of(args[0])(many=True, **kwargs)
    if origin is list:
        return serializers.ListField(child=_field(args[0]), **kwargs)
    if origin is dict:
        return serializers.DictField(child=_field(args[1]), **kwargs)
    if _is_shape(hint):
        if hint in _BUILDING:  # a recursive shape (FlameNode's children)
            return _annotated({"$ref": f"#/components/schemas/{_BUILDING[hint]}"})(**kwargs)
        return shape_of(hint)(**kwargs)
    if inspect.isclass(hint) and issubclass(hint, serializers.Field):
        return hint(**kwargs)
    return BASIC[hint](**kwargs)


BASIC = {
    int: serializers.IntegerField,
    float: serializers.FloatField,
    str: serializers.CharField,
    bool: serializers.BooleanField,
}


def _is_shape(hint: Any) -> bool:
    return typing.is_typeddict(hint) or inspect.isclass(hint) and dataclasses.is_dataclass(hint)


def _annotated(schema: dict[str, Any]) -> type[serializers.Field]:
    """A field class drf-spectacular describes with `schema` (a union, a `$ref`)."""
    return extend_schema_field(schema)(type("TypedField", (serializers.JSONField,), {}))


def _field_docs(shape: type) -> dict[str, str]:
    """The docstrings written under the fields of a TypedDict (and its bases') or a
    dataclass."""
    docs: dict[str, str] = {}
    for base in [*getattr(shape, "__orig_bases__", ()), shape]:
        if not _is_shape(base):
            continue
        try:
            body = ast.parse(textwrap.dedent(inspect.getsource(base))).body[0].body
        except (OSError, TypeError):
            continue
        for field, text in zip(body, body[1:], strict=False):
            if isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name):
                if isinstance(text, ast.Expr) and isinstance(text.value, ast.Constant):
                    docs[field.target.id] = " ".join(str(text.value.value).split())
    return docs


# The object a path's `{id}` names, by the path's first segment.
ID_OF = {"groups": "whole-job capture", "processes": "run process"}


def finish(result: dict, generator, request, public) -> dict:
    """Postprocessing hook: a description for `{id}` path parameters (function views
    name no model), `required` on bodies that cannot be left out, the links between
    operations (config.api_links)."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    for path, operations in result.get("paths", {}).items():
        kind = path.split("/")[2]
        for operation in operations.values():
            for param in operation.get("parameters", []):
                if param["in"] == "path" and param["name"] == "id":
                    what = ID_OF.get(kind, kind.rstrip("s"))
                    param.setdefault("description", f"The {what}'s id.")
            _required_body(operation.get("requestBody"), schemas)
    for schema in schemas.values():
        if RULES in schema:
            schema["allOf"] = [{**rule, RULE: True} for rule in schema.pop(RULES)]
    _typed_nullable_refs(schemas)
    add_links(result.get("paths", {}))
    return result


def _required_body(body: dict | None, schemas: dict) -> None:
    """A body whose schema refuses an empty object (required fields, a choice of
    required groups: `oneOf`) must be sent: drf-spectacular marks only the first kind,
    and a generated client would make the other optional."""
    if not body:
        return
    for content in body.get("content", {}).values():
        schema = content.get("schema", {})
        ref = schema.get("$ref", "")
        schema = schemas.get(ref.rpartition("/")[2], {}) if ref else schema
        if schema.get("required") or schema.get("oneOf"):
            body["required"] = True


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
