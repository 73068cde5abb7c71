"""Tiny typed readers for environment variables that fail loudly on bad values.

Every message names the variable, so a typo at start-up reads as one clear line.
"""

import os
import socket
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use 1/0, true/false, yes/no)")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be at least {minimum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_url(name: str, schemes: tuple[str, ...]) -> str:
    """An URL with one of the allowed schemes, or "" when unset."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return ""
    parts = urlsplit(raw)
    if parts.scheme not in schemes:
        allowed = ", ".join(f"{s}://" for s in schemes)
        raise ImproperlyConfigured(f"{name}={raw!r}: scheme must be one of {allowed}")
    if not parts.hostname and parts.scheme not in ("sqlite",):
        raise ImproperlyConfigured(f"{name}={raw!r}: no host name")
    return raw


def local_port_answers(port: int, timeout_s: float = 0.3) -> bool:
    """True when something accepts TCP connections on 127.0.0.1:`port` (tests, bench)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s):
            return True
    except OSError:
        return False
