"""Request-level guards.

- `UploadLimitMiddleware` refuses request bodies over FLAMEDECK_MAX_UPLOAD_MB before
  anything reads them. It sits first in MIDDLEWARE: CSRF and the views parse multipart
  bodies, so the check must come before them, from the Content-Length header alone.
- `RequestBodyMiddleware`, right after it: a JSON body sent to any write endpoint
  (API or page) must be one JSON object, and a form body must fit Django's field
  and size limits; otherwise 400 (413 for size) naming the problem, before any
  middleware or view reads the body and could fail on it.
- `ValidationErrorMiddleware`: input that a view refuses is a 400, never a 500.
  `config.params` raises Django's ValidationError for integers from outside; a page
  view that lets one escape (a query parameter it parsed without a form) answers 400
  with the reason instead of a server error. The API does the same through
  `config.api_errors`.
"""

import json

from django.conf import settings
from django.core.exceptions import (
    RequestDataTooBig,
    TooManyFieldsSent,
    TooManyFilesSent,
    ValidationError,
)
from django.http import HttpResponse, HttpResponseBadRequest, JsonResponse

WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")


def _too_large(request) -> str | None:
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return None  # Django itself answers a malformed length with an empty body
    limit_mb = settings.FLAMEDECK_MAX_UPLOAD_MB
    if length <= limit_mb * 1024 * 1024:
        return None
    return (
        f"Upload too large: {length / 1024 / 1024:.0f} MB is over the "
        f"{limit_mb} MB limit (FLAMEDECK_MAX_UPLOAD_MB)."
    )


def refusal(request, reason: str, status: int) -> HttpResponse:
    """`reason` as the API's JSON error or as plain text for a page."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": reason}, status=status)
    return HttpResponse(reason + "\n", status=status, content_type="text/plain; charset=utf-8")


class UploadLimitMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        reason = _too_large(request)
        if reason is None:
            return self.get_response(request)
        return refusal(request, reason, 413)


def _not_a_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def json_body_problem(body: bytes) -> str | None:
    """Why `body` is not one JSON object, or None."""
    try:
        value = json.loads(body, parse_constant=_not_a_constant)
    except RecursionError:
        return "The request body nests too deeply."
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError included
        return f"The request body is not valid JSON ({str(exc)[:200]})."
    if isinstance(value, dict):
        return None
    kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )
    return f"The request body must be a JSON object ({{...}}), not {kind}."


# Django's own limits, as (setting, what it bounds, status) per exception they raise.
_LIMITS = {
    RequestDataTooBig: ("DATA_UPLOAD_MAX_MEMORY_SIZE", "bytes of body outside file uploads", 413),
    TooManyFieldsSent: ("DATA_UPLOAD_MAX_NUMBER_FIELDS", "form fields", 400),
    TooManyFilesSent: ("DATA_UPLOAD_MAX_NUMBER_FILES", "files", 400),
}


def _is_json(request) -> bool:
    return request.content_type == "application/json" or request.content_type.endswith("+json")


def _limit_problem(request) -> tuple[str, int] | None:
    """Read the body the way views will; a problem becomes (reason, status)."""
    try:
        if _is_json(request):
            problem = json_body_problem(request.body) if request.body else None
            return (problem, 400) if problem else None
        if request.method == "POST":
            request.POST  # noqa: B018 — parsed now, so a limit is refused here by name
    except tuple(_LIMITS) as exc:
        setting, what, status = _LIMITS[type(exc)]
        return f"More than {getattr(settings, setting)} {what} ({setting}).", status
    return None


class RequestBodyMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        found = _limit_problem(request) if request.method in WRITE_METHODS else None
        if found is None:
            return self.get_response(request)
        return refusal(request, *found)


class ValidationErrorMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, ValidationError):
            reason = "; ".join(exception.messages)[:500]
            return HttpResponseBadRequest(
                f"Bad request: {reason}", content_type="text/plain; charset=utf-8"
            )
        return None


def client_ip(request) -> str | None:
    """The client's address for login throttling: REMOTE_ADDR, or with
    FLAMEDECK_PROXY_COUNT = N proxies in front, the Nth entry from the right of
    X-Forwarded-For (entries further left are whatever the client claimed)."""
    count = settings.FLAMEDECK_PROXY_COUNT
    forwarded = [a.strip() for a in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    forwarded = [a for a in forwarded if a]
    if count and len(forwarded) >= count:
        return forwarded[-count]
    return request.META.get("REMOTE_ADDR")
