"""Download responses: a streamed body under a file name that says what it holds."""

import re
import unicodedata
from collections.abc import Iterable

from django.http import StreamingHttpResponse
from django.utils.http import content_disposition_header

from profiles.models import Capture

# A run of anything else (dashes included) becomes one dash.
_UNSAFE = re.compile(r"[^A-Za-z0-9_.]+")
MAX_STEM = 120


def file_name(*parts: str, suffix: str) -> str:
    """`capture-42-gpu01-1234-rank-3.speedscope.json`: the parts joined by "-", each
    reduced to ASCII letters, digits, `_`, `.` and `-` (labels are user text, and a
    name is all a browser keeps), the stem at most MAX_STEM characters."""
    cleaned = (_UNSAFE.sub("-", _ascii(part)).strip("-.") for part in parts)
    stem = "-".join(part for part in cleaned if part)[:MAX_STEM].rstrip("-.")
    return f"{stem or 'flamedeck'}.{suffix}"


def _ascii(text: str) -> str:
    """Accents dropped (Ü → U), other non-ASCII characters removed."""
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()


def capture_file_name(capture: Capture, suffix: str) -> str:
    """Named after the capture: its id and target (host:pid role), or the imported file."""
    return file_name(f"capture-{capture.pk}", capture.target_label, suffix=suffix)


def streamed(body: Iterable[bytes | str], content_type: str, name: str) -> StreamingHttpResponse:
    response = StreamingHttpResponse(body, content_type=f"{content_type}; charset=utf-8")
    response["Content-Disposition"] = content_disposition_header(True, name)
    response["X-Content-Type-Options"] = "nosniff"
    return response
