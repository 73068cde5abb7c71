"""The JSON API as a browser asks for it (`Accept: text/html`): the same JSON,
indented on a page that links the page for people and the API reference.

DRF's browsable API would need inline styles the Content-Security-Policy forbids;
this page has none (the base template's one script and stylesheet). Clients that
send `*/*`, `application/json` or no Accept header still get JSON: JSONRenderer
comes first in DEFAULT_RENDERER_CLASSES.
"""

import json

from django.template.loader import render_to_string
from django.urls import NoReverseMatch, reverse
from rest_framework import renderers
from rest_framework.utils.encoders import JSONEncoder

# What a browser shows of one answer; the whole of it is one `?format=json` away.
MAX_SHOWN_CHARS = 1_000_000

# API endpoint (url name) -> the dashboard page that shows the same thing.
PAGES = {
    "host_list": "runs:host_list",
    "host_detail": "runs:host_detail",
    "host_check": "runs:host_detail",
    "run_list": "runs:run_list",
    "run_detail": "runs:run_detail",
    "run_processes": "runs:run_detail",
    "run_process_detail": "runs:run_detail",
    "run_check": "runs:run_detail",
    "run_capture_all": "runs:run_detail",
    "register": "runs:run_list",
    "capture_list": "profiles:capture_list",
    "capture_import": "profiles:capture_import",
    "capture_detail": "profiles:capture_detail",
    "capture_flamegraph": "profiles:capture_detail",
    "capture_sandwich": "profiles:capture_detail",
    "capture_cancel": "profiles:capture_detail",
    "group_detail": "profiles:group_detail",
    "group_live": "profiles:group_detail",
    "group_flamegraph": "profiles:group_detail",
    "compare": "compare:compare",
    "compare_groups": "compare:compare_groups",
}


def page_for(request) -> str | None:
    """The dashboard page for this API URL (same object, same query), if there is one."""
    match = request.resolver_match
    name = PAGES.get(match.url_name) if match else None
    if name is None:
        return None
    try:
        url = reverse(name, kwargs={k: v for k, v in match.kwargs.items() if k == "pk"})
    except NoReverseMatch:
        return None
    query = request.GET.urlencode() if name.startswith("compare:") else ""
    return url + (f"?{query}" if query else "")


def _shown(data) -> tuple[str, bool]:
    if data is None:
        return "", False
    text = json.dumps(data, cls=JSONEncoder, indent=2, ensure_ascii=False)
    return text[:MAX_SHOWN_CHARS], len(text) > MAX_SHOWN_CHARS


class JSONPageRenderer(renderers.BaseRenderer):
    media_type = "text/html"
    format = "html"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> str:
        context = renderer_context or {}
        request, response = context["request"]._request, context["response"]
        body, cut = _shown(data)
        query = request.GET.copy()
        query["format"] = "json"
        page = {
            "path": request.path,
            "status": response.status_code,
            "body": body,
            "cut": cut,
            "json_url": f"{request.path}?{query.urlencode()}",
            "page_url": page_for(request),
            "docs_url": reverse("api:docs"),
        }
        return render_to_string("api/response.html", page, request=request)
