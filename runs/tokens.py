"""API tokens: created with a random key that is shown once, stored as its SHA-256.

A key has 256 bits of randomness, so a fast hash is enough (no password hasher
needed), and lookups stay one indexed query.
"""

import hashlib
import secrets
from datetime import timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from .models import ApiToken


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def api_token_create(
    *, user: AbstractBaseUser, name: str = "", days: int | None = 90
) -> tuple[ApiToken, str]:
    """A new token for `user` and its key (the only time the key exists in clear)."""
    key = secrets.token_hex(32)
    expires = timezone.now() + timedelta(days=days) if days else None
    token = ApiToken.objects.create(
        user=user, name=name, prefix=key[:8], key_hash=key_hash(key), expires_at=expires
    )
    return token, key


def api_token_revoke(*, user: AbstractBaseUser, prefix: str = "") -> int:
    """Revoke the user's live tokens (those whose key starts with `prefix`, if given)."""
    live = ApiToken.objects.filter(user=user, revoked_at__isnull=True)
    if prefix:
        live = live.filter(prefix__startswith=prefix[:8])
    return live.update(revoked_at=timezone.now())


def api_token_user(key: str) -> tuple[AbstractBaseUser, ApiToken] | None:
    """The user a live key belongs to; None for an unknown, revoked or expired key."""
    if not key or len(key) > 200:
        return None
    token = ApiToken.objects.select_related("user").filter(key_hash=key_hash(key)).first()
    now = timezone.now()
    if token is None or token.revoked_at or (token.expires_at and token.expires_at <= now):
        return None
    if not token.last_used_at or now - token.last_used_at > timedelta(minutes=5):
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user, token
