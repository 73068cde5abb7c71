"""Errors under /api/ are JSON, one shape per status (docs/api.md, "Errors").

- 400: `{"detail": "<field>: <reason>", "<field>": ["<reason>", ...], ...}`: `detail`
  says the first problem in one line; each refused field (a nested one by its dotted
  path, `layout.dp`, `notify.2`) has its reasons as a list of strings.
- any other status: `{"detail": "<reason>"}` (a 409 or 503 may add the object's state).

`exception_handler` (DRF's, plus the errors a view may raise from Django itself) writes
the views' errors so; `ApiErrorMiddleware` writes what never reaches a DRF view so:
an /api/ URL that matches no endpoint (404), a refused method outside DRF (405), a
server error (500), Django's own 400/403 pages.
"""

from django.core.exceptions import BadRequest
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import JsonResponse
from rest_framework import exceptions
from rest_framework.views import exception_handler as drf_exception_handler


class Conflict(exceptions.APIException):
    """409: the objects' state refuses the request (a name taken, a run without
    processes); the schema cannot say it, the reason does."""

    status_code = 409
    default_detail = "The objects' state refuses this request."
    default_code = "conflict"


# The one field name for a problem that is no field's (DRF's own name for it).
NO_FIELD = "non_field_errors"


def _as_drf(exc: Exception) -> Exception:
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else exc.messages
        return exceptions.ValidationError(detail)
    if isinstance(exc, BadRequest):
        return exceptions.ParseError(str(exc) or "Bad request.")
    if isinstance(exc, RecursionError):
        return exceptions.ParseError("The request body nests too deeply.")
    return exc


def field_errors(data: object, path: str = "") -> dict[str, list[str]]:
    """DRF's error detail (nested dicts and lists of any depth) as one flat mapping:
    dotted field path -> its reasons."""
    found: dict[str, list[str]] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            inner = f"{path}.{key}" if path else str(key)
            for name, reasons in field_errors(value, inner).items():
                found.setdefault(name, []).extend(reasons)
    elif isinstance(data, list | tuple):
        for index, item in enumerate(data):
            if isinstance(item, dict | list | tuple):  # a list's items, or many objects
                inner = f"{path}.{index}" if path else str(index)
                for name, reasons in field_errors(item, inner).items():
                    found.setdefault(name, []).extend(reasons)
            else:
                found.setdefault(path or NO_FIELD, []).append(str(item))
    else:
        found.setdefault(path or NO_FIELD, []).append(str(data))
    return found


def bad_request_body(data: object) -> dict:
    """A 400's body: `detail` (one line) and the refused fields' reasons."""
    if isinstance(data, dict) and set(data) == {"detail"} and isinstance(data["detail"], str):
        return {"detail": str(data["detail"])}
    fields = field_errors(data)
    fields.pop("detail", None)
    name, reasons = next(iter(fields.items()), (NO_FIELD, ["Bad request."]))
    more = sum(len(r) for r in fields.values()) - 1
    first = reasons[0] if name == NO_FIELD else f"{name}: {reasons[0]}"
    detail = first + (f" (and {more} more)" if more > 0 else "")
    return {"detail": detail, **fields}


def exception_handler(exc: Exception, context: dict):
    response = drf_exception_handler(_as_drf(exc), context)
    if response is None:
        return None
    if response.status_code == 400:
        response.data = bad_request_body(response.data)
    elif not (isinstance(response.data, dict) and isinstance(response.data.get("detail"), str)):
        response.data = {"detail": _one_line(response.data)}
    return response


def _one_line(data: object) -> str:
    fields = field_errors(data)
    return "; ".join(r for reasons in fields.values() for r in reasons) or "Refused."


# What a status says when Django answered it without words of its own.
REASONS = {
    400: "Bad request.",
    403: "Forbidden.",
    404: "No such endpoint or object under /api/ (GET /api/ lists the endpoints).",
    405: "Method not allowed here.",
    413: "Request body too large.",
    500: "Server error: the server's log has the details.",
}


def csrf_failure(request, reason: str = ""):
    """CSRF_FAILURE_VIEW: under /api/ a JSON 403 that names CSRF and the fix; elsewhere
    Django's own page."""
    if is_api_path(request.path):
        detail = (
            f"CSRF verification failed ({reason or 'no reason given'}): a session call "
            "sends the csrftoken cookie's value as X-CSRFToken, or use a token "
            "(Authorization: Token <key>)."
        )
        return JsonResponse({"detail": detail}, status=403)
    from django.views.csrf import csrf_failure as django_csrf_failure

    return django_csrf_failure(request, reason=reason)


def is_api_path(path: str) -> bool:
    """Under /api/, except the reference page (a page for people, /api/docs/)."""
    return path.startswith("/api/") and not path.startswith("/api/docs/")


class ApiErrorMiddleware:
    """An error answer under /api/ that is not JSON (Django's own 400/403/404/405/500
    pages) becomes `{"detail": ...}` with the same status and headers that matter
    (Allow, WWW-Authenticate, Retry-After). Outside /api/ pages keep their HTML."""

    KEPT_HEADERS = ("Allow", "WWW-Authenticate", "Retry-After")

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if response.status_code < 400 or not is_api_path(request.path):
            return response
        if response.get("Content-Type", "").startswith("application/json"):
            return response
        if getattr(getattr(response, "accepted_renderer", None), "format", "") == "html":
            return response  # the JSON answer on a page, as a browser asked (config.api_html)
        status = response.status_code
        body = {"detail": REASONS.get(status, "Refused.")}
        if response.get("Content-Type", "").startswith("text/plain") and response.content:
            body["detail"] = response.content.decode(errors="replace").strip()[:500]
        data = getattr(response, "data", None)  # a DRF answer in another media type (the
        if isinstance(data, dict) and isinstance(data.get("detail"), str):  # schema's YAML)
            body["detail"] = data["detail"][:500]
        if status == 405:
            body["detail"] = f"Method {request.method} not allowed here."
        if status == 400:
            body = bad_request_body(body)
        answer = JsonResponse(body, status=status)
        for header in self.KEPT_HEADERS:
            if header in response:
                answer[header] = response[header]
        return answer
