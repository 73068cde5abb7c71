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


def env_proxy_ssl_header(name: str) -> tuple[str, str] | None:
    """`HTTP_X_FORWARDED_PROTO,https` → ("HTTP_X_FORWARDED_PROTO", "https"); unset → None.

    Django trusts this header blindly, so a malformed value must stop start-up rather
    than silently mark every request as secure (or none).
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    header, sep, value = (part.strip() for part in raw.partition(","))
    if not sep or not header.startswith("HTTP_") or not value or "," in value:
        raise ImproperlyConfigured(
            f"{name}={raw!r} must look like HTTP_X_FORWARDED_PROTO,https "
            "(a request.META key starting with HTTP_, a comma, the value meaning https)"
        )
    if not header.replace("_", "").isalnum() or not header.isupper():
        raise ImproperlyConfigured(f"{name}={raw!r}: {header!r} is not an upper-case META key")
    return header, value


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


def env_artifacts(name: str, media_root: str) -> dict:
    """A STORAGES entry for capture artifacts: `filesystem` (default, under
    `media_root`), `database`, or `s3://bucket/prefix` (django-storages; endpoint,
    region and credentials from the AWS_* variables)."""
    raw = os.environ.get(name, "").strip() or "filesystem"
    return artifacts_storage(raw, media_root, name=name)


def artifacts_storage(spec: str, media_root: str, *, name: str = "--to") -> dict:
    if spec == "filesystem":
        return {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": media_root},
        }
    if spec == "database":
        return {"BACKEND": "profiles.storage.database.DatabaseStorage"}
    parts = urlsplit(spec)
    if parts.scheme != "s3" or not parts.hostname:
        raise ImproperlyConfigured(
            f"{name}={spec!r}: use filesystem, database or s3://bucket/prefix"
        )
    options = {
        "bucket_name": parts.hostname,
        "location": parts.path.strip("/"),
        "file_overwrite": False,
        "default_acl": None,
    }
    endpoint = os.environ.get("AWS_S3_ENDPOINT_URL", "").strip()
    region = os.environ.get("AWS_S3_REGION_NAME") or os.environ.get("AWS_DEFAULT_REGION")
    if endpoint:
        options["endpoint_url"] = endpoint
    if region:
        options["region_name"] = region
    return {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": options}
