"""The one place that talks to Apprise: check a notification URL, mask it, send.

A notification URL often carries its secret in the open (a webhook path, a token, a
password), so nothing here returns or logs one in full: `mask_url` keeps the scheme,
host and port and masks everything else; Apprise's and urllib3's log records pass
through `SecretFilter` (their DEBUG lines name the whole URL).
"""

from __future__ import annotations

import logging
import re
from typing import NamedTuple
from urllib.parse import urlsplit

import apprise

MASK = "…"
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>]+", re.I)
# urllib3's request line: `"POST /path?query HTTP/1.1"` (no scheme, the path is the secret)
_REQUEST_LINE = re.compile(r'"([A-Z]+) (/[^\s"]*) (HTTP/[\d.]+)"')
# Apprise writes the request it makes (DEBUG), urllib3 the path it posts to (DEBUG).
SCRUBBED_LOGGERS = ("apprise", "urllib3.connectionpool")


class Sent(NamedTuple):
    ok: bool
    error: str


def url_problem(url: str) -> str | None:
    """Why Apprise cannot use `url`, or None."""
    if not url or len(url) > 2000 or any(c.isspace() for c in url):
        return "give one Apprise URL (no spaces, at most 2000 characters)"
    if apprise.Apprise.instantiate(url) is None:
        return (
            f"Apprise does not know {mask_url(url)!r}: see Apprise's list of services "
            "(json://host/path for a generic JSON webhook)"
        )
    return None


def _segment(text: str) -> str:
    if "..." in text or len(text) < 3:
        return MASK if len(text) < 3 else text.replace("...", MASK)
    return f"{text[0]}{MASK}{text[-1]}"


def _masked(url: str) -> str:
    parts = urlsplit(url)
    user = (
        f"{parts.username}:****@"
        if parts.password
        else (f"{parts.username}@" if parts.username else "")
    )
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    host = parts.hostname or ""
    path = "/".join(_segment(seg) for seg in parts.path.split("/") if seg)
    query = f"?{MASK}" if parts.query else ""
    return f"{parts.scheme}://{user}{host}{port}{'/' + path if path else ''}{query}"


def mask_url(url: str) -> str:
    """`url` with only its scheme, host and port readable: Apprise's own privacy form
    first (it knows which parts of a `slack://` URL are tokens), then every path
    segment and the query masked (a webhook's path is its secret)."""
    plugin = apprise.Apprise.instantiate(url) if url else None
    private = plugin.url(privacy=True) if plugin else url
    try:
        return _masked(private)
    except ValueError:
        return f"{url.partition('://')[0]}://{MASK}"


def scrub(text: str) -> str:
    """Every URL and HTTP request line in `text` masked (for errors and log lines)."""
    text = _URL.sub(lambda m: _masked_loose(m.group(0)), text)
    return _REQUEST_LINE.sub(lambda m: f'"{m[1]} {_masked_path(m[2])} {m[3]}"', text)


def _masked_path(path: str) -> str:
    masked = "/".join(_segment(seg) for seg in path.partition("?")[0].split("/") if seg)
    return f"/{masked}{'?' + MASK if '?' in path else ''}"


def _masked_loose(url: str) -> str:
    try:
        return _masked(url)
    except ValueError:
        return f"{url.partition('://')[0]}://{MASK}"


class SecretFilter(logging.Filter):
    """Masks URLs in a record before any handler writes it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 — a malformed record is dropped, not leaked
            return False
        record.msg, record.args = scrub(message), ()
        return True


for _name in SCRUBBED_LOGGERS:
    logging.getLogger(_name).addFilter(SecretFilter())


def send(url: str, *, title: str, body: str) -> Sent:
    """Send one plain-text message; (ok, the reason it failed, masked)."""
    client = apprise.Apprise()
    if not client.add(url):
        return Sent(False, f"Apprise refused the URL {mask_url(url)}")
    with apprise.LogCapture(level=logging.WARNING) as captured:
        ok = bool(client.notify(title=title, body=body, body_format=apprise.NotifyFormat.TEXT))
    said = " ".join(line.split(" - ", 2)[-1] for line in captured.getvalue().splitlines())
    return Sent(ok, "" if ok else scrub(said)[:1000] or "Apprise reported a failure")
