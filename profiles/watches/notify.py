"""The one place that talks to Apprise: check a notification URL, mask it, send.

A notification URL carries its secret in the open, and where depends on the service:
a password, a user name that is a token (`json://TOKEN@host/x`), a host that is one
(`ntfy://TOPIC`: the topic is the credential; `slack://T…/B…/X…`: three tokens), path
segments, the query. So nothing here returns or logs one in full:
- `mask_url` (what host admins see; everyone else sees a target's name only) keeps
  the scheme, and the host and port only when they are the service's network
  address: the service takes a host (its Apprise `host` token), Apprise's own privacy
  form shows it, and it reads as an address (a dotted name, an IP, localhost). User
  names, passwords, every path segment, the query and the fragment are masked.
- `scrub` masks every URL and HTTP request line in a text; Apprise's and urllib3's
  log records pass through it (`SecretFilter`: their DEBUG lines name whole URLs).
- While Apprise reads a URL or `send` runs, every log record made in the process (any
  logger, any thread) and the failure it reports have that URL's secret parts
  masked: a service's DEBUG line names users and targets and may print a payload
  that holds its token, outside any URL.
tests/profiles/watches/test_notify_secrets.py plants secrets in every scheme Apprise ships.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import re
import threading
from collections import Counter
from collections.abc import Iterable
from typing import NamedTuple
from urllib.parse import SplitResult, parse_qsl, unquote, urlsplit

import apprise

MASK = "…"
_URL = re.compile(r"\b[a-z0-9][a-z0-9+.-]*://[^\s'\"<>]+", re.I)  # `46elks://` too
# urllib3's request line: `"POST /path?query HTTP/1.1"` (no scheme, the path is the secret)
_REQUEST_LINE = re.compile(r'"([A-Z]+) (/[^\s"]*) (HTTP/[\d.]+)"')
# Apprise writes the request it makes (DEBUG), urllib3 the path it posts to (DEBUG).
SCRUBBED_LOGGERS = ("apprise", "urllib3.connectionpool")
# A secret part shorter than this is not masked inside log lines (it would mask words).
_SHORTEST_SECRET = 4


class Sent(NamedTuple):
    ok: bool
    error: str


def url_problem(url: str) -> str | None:
    """Why Apprise cannot use `url`, or None."""
    if not url or len(url) > 2000 or any(c.isspace() for c in url):
        return "give one Apprise URL (no spaces, at most 2000 characters)"
    if _instantiate(url) is None:
        return (
            f"Apprise does not know {mask_url(url)!r}: see Apprise's list of services "
            "(json://host/path for a generic JSON webhook)"
        )
    return None


# --- masking ------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def mask_url(url: str) -> str:
    """`url` as a host admin may see it: the scheme, and the host and port only where
    they are the service's address (the module doc); everything else masked.

    Kept per URL (a bounded cache): the mask depends on the URL alone, and building
    Apprise's plugin for it took 3 ms a URL, paid by every row of every watch and
    target page (the admin's target list of 100 rows: 0.3 s)."""
    try:
        parts = _split(url)
        port = parts.port
    except ValueError:  # `tgram://123:TOKEN/…`: a token where a port would be
        return f"{_scheme(url)}://{MASK}"
    plugin = _instantiate(url) if url else None
    host = parts.hostname or ""
    if host and not _host_is_address(plugin, host):
        host, port = MASK, None
    return _assembled(parts, host, port)


def _split(url: str) -> SplitResult:
    """urlsplit, for schemes it does not take as one too (`46elks://user:pass@…`)."""
    scheme, _, rest = url.partition("://")
    return urlsplit(f"x://{rest}")._replace(scheme=scheme)


def _instantiate(url: str) -> object | None:
    """Apprise's plugin for `url`, or None; what Apprise logs meanwhile (its DEBUG
    lines name users and targets) loses the URL's secret parts."""
    with _Masking(secret_parts(url)):
        return apprise.Apprise.instantiate(url)


def _scheme(url: str) -> str:
    return "".join(c for c in url.partition("://")[0].lower() if c.isalnum() or c in "+.-")[:20]


def _assembled(parts: SplitResult, host: str, port: int | None) -> str:
    user = f"{MASK}@" if parts.username is not None or parts.password is not None else ""
    where = f"{host}:{port}" if port else host
    path = "/".join(MASK for segment in parts.path.split("/") if segment)
    query = f"?{MASK}" if parts.query else ""
    fragment = f"#{MASK}" if parts.fragment else ""
    return f"{_scheme(parts.scheme)}://{user}{where}{'/' + path if path else ''}{query}{fragment}"


def _host_is_address(plugin: object, host: str) -> bool:
    if plugin is None or "host" not in getattr(plugin, "template_tokens", {}):
        return False
    if (getattr(plugin, "host", "") or "").lower() != host.lower():
        return False  # the service read that place as something else (ntfy's topic)
    try:
        private = plugin.url(privacy=True).lower()
    except Exception:  # noqa: BLE001 — a plugin that cannot say is not trusted
        return False
    return host.lower() in private and _reads_as_address(host)


def _reads_as_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
        return True
    except ValueError:
        return host == "localhost" or ("." in host and not host.startswith("."))


def secret_parts(url: str) -> set[str]:
    """The pieces of `url` that may be secret, as written and decoded: user,
    password, host (an address too: logs need no host), path segments, query keys
    and values, fragment. Apprise is not asked (its own log lines are what these
    mask)."""
    try:
        parts = _split(url)
        port = parts.port
    except ValueError:
        return _pieces([url.partition("://")[2]], split=True)
    where = parts.netloc.rpartition("@")[2]  # as written: hostname is lowercased
    pieces = [parts.username, parts.password, where, where.rpartition(":")[0] if port else None]
    pieces += parts.path.split("/") + [parts.fragment]
    pieces += [v for pair in parse_qsl(parts.query, keep_blank_values=True) for v in pair]
    return _pieces(pieces)


def _pieces(pieces: Iterable[str | None], split: bool = False) -> set[str]:
    found: set[str] = set()
    for piece in pieces:
        if not piece:
            continue
        for text in re.split(r"[/:@?#&=]", piece) if split else [piece]:
            for form in (text, unquote(text), unquote(text).lstrip("#@+")):
                if len(form) >= _SHORTEST_SECRET:
                    found.add(form)
    return found


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """Every URL and HTTP request line in `text` masked, and each of `secrets` in any
    case (urllib3 writes a host in lower case)."""
    pieces = sorted({re.escape(s) for s in secrets if s}, key=len, reverse=True)
    if pieces:
        text = re.sub("|".join(pieces), MASK, text, flags=re.IGNORECASE)
    text = _URL.sub(lambda m: _masked_loose(m.group(0)), text)
    return _REQUEST_LINE.sub(lambda m: f'"{m[1]} {_masked_path(m[2])} {m[3]}"', text)


def _masked_path(path: str) -> str:
    masked = "/".join(MASK for seg in path.partition("?")[0].split("/") if seg)
    return f"/{masked}{'?' + MASK if '?' in path else ''}"


def _masked_loose(url: str) -> str:
    """A URL found in a log line: the host kept only when it reads as an address."""
    try:
        parts = _split(url)
        port = parts.port
    except ValueError:
        return f"{_scheme(url)}://{MASK}"
    host = parts.hostname or ""
    if host and not _reads_as_address(host):
        host, port = MASK, None
    return _assembled(parts, host, port)


# --- logs -------------------------------------------------------------------------------


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

_SENDING: Counter[str] = Counter()  # the secret parts of the URLs being sent right now
_SENDING_LOCK = threading.Lock()
_make_record = logging.getLogRecordFactory()


def _masked_record(*args, **kwargs) -> logging.LogRecord:
    """Every record made while a send runs loses that URL's secrets (any logger: a
    plugin's own, urllib3's, requests', smtplib's), its traceback included."""
    record = _make_record(*args, **kwargs)
    if not _SENDING:
        return record
    with _SENDING_LOCK:
        secrets = list(_SENDING)
    try:
        record.msg, record.args = scrub(record.getMessage(), secrets), ()
    except Exception:  # noqa: BLE001 — never let a bad record through unmasked
        record.msg, record.args = "(a log line that could not be masked)", ()
    if record.exc_info:
        text = logging.Formatter().formatException(record.exc_info)
        record.exc_text, record.exc_info = scrub(text, secrets), None
    return record


logging.setLogRecordFactory(_masked_record)


class _Masking:
    """While inside, log records lose `secrets` (module doc)."""

    def __init__(self, secrets: set[str]) -> None:
        self.secrets = secrets

    def __enter__(self) -> _Masking:
        with _SENDING_LOCK:
            _SENDING.update(self.secrets)
        return self

    def __exit__(self, *exc: object) -> None:
        with _SENDING_LOCK:
            _SENDING.subtract(self.secrets)
            for secret in [s for s, n in _SENDING.items() if n <= 0]:
                del _SENDING[secret]


def send(url: str, *, title: str, body: str) -> Sent:
    """Send one plain-text message; (ok, the reason it failed, masked)."""
    secrets = secret_parts(url)
    with _Masking(secrets):
        client = apprise.Apprise()
        if not client.add(url):
            return Sent(False, f"Apprise refused the URL {mask_url(url)}")
        with apprise.LogCapture(level=logging.WARNING) as captured:
            ok = bool(client.notify(title=title, body=body, body_format=apprise.NotifyFormat.TEXT))
        said = " ".join(line.split(" - ", 2)[-1] for line in captured.getvalue().splitlines())
    return Sent(ok, "" if ok else scrub(said, secrets)[:1000] or "Apprise reported a failure")
