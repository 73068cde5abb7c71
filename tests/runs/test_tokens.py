"""API tokens: shown once, stored as a hash, with expiry and revocation."""

import hashlib
from datetime import timedelta

import pytest
from django.contrib.admin.sites import site
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from runs.models import ApiToken
from runs.tokens import api_token_create

pytestmark = pytest.mark.django_db


def _with_key(client, key: str):
    client.defaults["HTTP_AUTHORIZATION"] = f"Token {key}"
    return client


def test_create_api_token_prints_a_key_once_and_stores_only_its_hash(client, owner, capsys):
    call_command("create_api_token", "owner")
    key = capsys.readouterr().out.strip()
    token = ApiToken.objects.get(user=owner)
    assert token.key_hash == hashlib.sha256(key.encode()).hexdigest()
    assert key not in {getattr(token, f.attname) for f in ApiToken._meta.fields} - {None}
    assert token.expires_at > timezone.now() + timedelta(days=89)
    assert _with_key(client, key).get("/api/hosts/").status_code == 200


def test_an_expired_or_revoked_token_is_refused(client, owner):
    token, key = api_token_create(user=owner)
    assert _with_key(client, key).get("/api/hosts/").status_code == 200
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert client.get("/api/hosts/").status_code == 401
    token, key = api_token_create(user=owner, days=0)
    assert token.expires_at is None
    call_command("revoke_api_token", "owner", "--prefix", key[:8])
    assert _with_key(client, key).get("/api/hosts/").status_code == 401


def test_rotate_revokes_the_users_other_tokens(client, owner, capsys):
    _, old = api_token_create(user=owner)
    call_command("create_api_token", "owner", "--rotate", "--days", "1")
    new = capsys.readouterr().out.strip()
    assert _with_key(client, old).get("/api/hosts/").status_code == 401
    assert _with_key(client, new).get("/api/hosts/").status_code == 200


def test_an_inactive_users_token_is_refused(client, owner):
    _, key = api_token_create(user=owner)
    owner.is_active = False
    owner.save()
    assert _with_key(client, key).get("/api/hosts/").status_code == 401


def test_the_admin_lists_tokens_without_their_keys_and_drf_plain_tokens_are_gone(
    admin_client, owner
):
    from rest_framework.authtoken.models import TokenProxy

    token, key = api_token_create(user=owner, name="ci")
    page = admin_client.get(reverse("admin:runs_apitoken_change", args=[token.pk]))
    assert page.status_code == 200
    body = page.content.decode()
    assert key not in body and token.key_hash not in body and token.prefix in body
    assert not site.is_registered(TokenProxy)
    assert admin_client.get(reverse("admin:runs_apitoken_add")).status_code == 403


def test_the_migration_hashes_plain_drf_tokens_and_deletes_them(client, owner):
    import importlib

    from django.apps import apps
    from rest_framework.authtoken.models import Token

    plain = Token.objects.create(user=owner)
    migration = importlib.import_module("runs.migrations.0003_security_host_admins_tokens")
    migration.hash_plain_tokens(apps, None)
    assert not Token.objects.exists()
    migrated = ApiToken.objects.get(user=owner)
    assert migrated.key_hash != plain.key and migrated.expires_at is not None
    assert _with_key(client, plain.key).get("/api/hosts/").status_code == 200
