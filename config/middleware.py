"""Request-level guards.

- `UploadLimitMiddleware` refuses request bodies over FLAMEDECK_MAX_UPLOAD_MB before
  anything reads them. It sits first in MIDDLEWARE: CSRF and the views parse multipart
  bodies, so the check must come before them, from the Content-Length header alone.
- `ValidationErrorMiddleware`: input that a view refuses is a 400, never a 500.
  `config.params` raises Django's ValidationError for integers from outside; a page
  view that lets one escape (a query parameter it parsed without a form) answers 400
  with the reason instead of a server error. The API does the same through
  `config.api_errors`.
"""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import HttpResponse, HttpResponseBadRequest, JsonResponse


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


class UploadLimitMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        reason = _too_large(request)
        if reason is None:
            return self.get_response(request)
        if request.path.startswith("/api/"):
            response = JsonResponse({"detail": reason}, status=413)
        else:
            response = HttpResponse(reason + "\n", status=413, content_type="text/plain")
        return response


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
