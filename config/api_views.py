"""The API's own front door: `/api/` (an index), `/api/schema/` (OpenAPI 3, generated
from the views by drf-spectacular) and `/api/docs/` (Swagger UI on that schema,
served from this origin so the Content-Security-Policy holds)."""

import re

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.shortcuts import render
from django.urls import URLPattern, get_resolver, reverse
from django.utils import translation
from django.views.decorators.http import require_GET
from drf_spectacular.utils import extend_schema, inline_serializer
from drf_spectacular.views import SpectacularAPIView
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from config import api_schema


class SchemaView(SpectacularAPIView):
    """The schema, generated and rendered once per process, version and format: it is a
    function of the code. Generating it walks every view (about 0.1 s, each time
    /api/docs/ loads) and writing it as YAML took another 84 ms a request."""

    _generated: dict[tuple, dict] = {}
    _rendered: dict[tuple, tuple[bytes, str]] = {}

    def _get_schema_response(self, request):
        version = self.api_version or request.version or self._get_version_parameter(request)
        key = (version, translation.get_language(), settings.ROOT_URLCONF)
        if key not in self._generated:
            generator = self.generator_class(
                urlconf=self.urlconf, api_version=version, patterns=self.patterns
            )
            self._generated[key] = generator.get_schema(request=request, public=self.serve_public)
        self.schema_key = key
        filename = self._get_filename(request, version)
        return Response(
            data=self._generated[key],
            headers={"Content-Disposition": f'inline; filename="{filename}"'},
        )

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        renderer = getattr(response, "accepted_renderer", None)
        if response.status_code != 200 or renderer is None or not hasattr(self, "schema_key"):
            return response  # refused (401/403/406): DRF renders its own answer
        key = (self.schema_key, type(renderer), response.accepted_media_type)
        if key not in self._rendered:
            response.render()
            self._rendered[key] = (response.content, response["Content-Type"])
        else:
            response.content, response["Content-Type"] = self._rendered[key]  # now rendered
        return response


# Anonymous callers get 401/403 from DRF, not the login page (contract 3).
schema = login_not_required(SchemaView.as_view())


@require_GET
def docs(request):
    """The browsable reference; a page, so an anonymous visitor is sent to log in."""
    return render(request, "api/docs.html", {"schema_url": reverse("api:schema")})


def endpoint_paths(patterns: list[URLPattern]) -> list[str]:
    """Every endpoint path of the API as the schema writes it (`{id}` for `<int:pk>`)."""
    paths = []
    for pattern in patterns:
        route = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", str(pattern.pattern))
        if pattern.name not in ("index", "schema", "docs"):
            paths.append("/api/" + route.replace("{pk}", "{id}"))
    return list(dict.fromkeys(paths))


INDEX = inline_serializer(
    "ApiIndex",
    {
        "schema": serializers.URLField(help_text="The OpenAPI 3 schema (YAML; ?format=json)."),
        "docs": serializers.URLField(help_text="The browsable reference (Swagger UI)."),
        "authentication": serializers.CharField(help_text="How to authenticate."),
        "endpoints": serializers.ListField(
            child=serializers.CharField(), help_text="Every endpoint path, `{id}` for an id."
        ),
    },
)


@extend_schema(
    summary="Where the schema and the reference are",
    description="Links to the OpenAPI schema and the reference, how to authenticate, and "
    "every endpoint's path.",
    responses={200: INDEX, **api_schema.errors(401, 403)},
    tags=["api"],
)
@login_not_required
@api_view(["GET"])
@permission_classes([IsAuthenticated])
def index(request):
    # The API's own patterns, read from the URL resolver (config.api_urls imports this
    # module, so importing it back would close a circle).
    urlpatterns = get_resolver().namespace_dict["api"][1].url_patterns
    return Response(
        {
            "schema": request.build_absolute_uri(reverse("api:schema")),
            "docs": request.build_absolute_uri(reverse("api:docs")),
            "authentication": "A session, or `Authorization: Token <key>` "
            "(manage.py create_api_token USERNAME).",
            "endpoints": endpoint_paths(urlpatterns),
        }
    )
