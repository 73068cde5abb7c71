"""DRF's exception handler, plus the errors a view may raise from Django itself.

A ValidationError from `config.params` or a model's `full_clean()` becomes a 400
naming the field; a body DRF could not parse (deeply nested JSON included) a 400.
"""

from django.core.exceptions import BadRequest
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import exceptions
from rest_framework.views import exception_handler as drf_exception_handler


def _as_drf(exc: Exception) -> Exception:
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else exc.messages
        return exceptions.ValidationError(detail)
    if isinstance(exc, BadRequest):
        return exceptions.ParseError(str(exc) or "Bad request.")
    if isinstance(exc, RecursionError):
        return exceptions.ParseError("The request body nests too deeply.")
    return exc


def exception_handler(exc: Exception, context: dict):
    return drf_exception_handler(_as_drf(exc), context)
