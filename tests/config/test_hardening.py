"""Production hardening from the environment: `check --deploy` is clean with the
production variables of docs/deployment.md, the HTTPS settings are typed and fail loudly, and
every response carries the Content-Security-Policy."""

import base64
import hashlib
import re
import shlex
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.urls import reverse

from config.env import env_proxy_ssl_header
from tests.config.test_settings import _manage

DEPLOYMENT = Path(__file__).resolve().parents[2] / "docs" / "deployment.md"
# The page's "..." stands for a real key; check --deploy judges its length and variety.
SECRET_KEY = "x7Qm2vN9rT4kW1pL8sZ3cB6yH0dF5gJ2aE9uR4tY7iO1wQ3eS6zX8cV0bN5mK2lP"


def documented_production_variables() -> dict[str, str]:
    """Every `export NAME=value` of the documented production set-up, as listed there."""
    text = DEPLOYMENT.read_text(encoding="utf-8")
    section = text.split("## Production-like set-up", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh", 1)[1].split("```", 1)[0]
    found = {}
    for line in block.splitlines():
        if line.startswith("export "):
            words = shlex.split(line.split(" #", 1)[0])[1:]
            found.update(word.split("=", 1) for word in words)
    return found


PRODUCTION = {**documented_production_variables(), "SECRET_KEY": SECRET_KEY}


def test_the_deployment_page_lists_the_variables_a_deployment_needs():
    needed = ["SECRET_KEY", "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS", "SECURE_COOKIES"]
    needed += ["SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS", "FLAMEDECK_LOCAL_HOST"]
    for name in needed:
        assert name in documented_production_variables(), name
    assert documented_production_variables()["FLAMEDECK_LOCAL_HOST"] == "0"


def test_check_deploy_is_clean_with_the_production_variables(tmp_path, monkeypatch):
    # Set by the browser tests' conftest for Playwright; never in a deployment.
    monkeypatch.delenv("DJANGO_ALLOW_ASYNC_UNSAFE", raising=False)
    result = _manage(["check", "--deploy", "--fail-level", "WARNING"], tmp_path, **PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_check_deploy_warns_about_a_local_host_left_on_by_default(tmp_path, monkeypatch):
    monkeypatch.delenv("DJANGO_ALLOW_ASYNC_UNSAFE", raising=False)
    monkeypatch.delenv("FLAMEDECK_LOCAL_HOST", raising=False)
    default = {k: v for k, v in PRODUCTION.items() if k != "FLAMEDECK_LOCAL_HOST"}
    result = _manage(["check", "--deploy", "--fail-level", "WARNING"], tmp_path, **default)
    assert result.returncode != 0 and "flamedeck.W001" in result.stderr, result.stderr
    assert "FLAMEDECK_LOCAL_HOST=0" in result.stderr
    chosen = _manage(["check", "--deploy", "--fail-level", "WARNING"], tmp_path,
                     **{**default, "FLAMEDECK_LOCAL_HOST": "1"})  # fmt: skip
    assert chosen.returncode == 0, chosen.stderr  # on purpose: no warning
    debug = _manage(["check", "--fail-level", "WARNING"], tmp_path, **default, DEBUG="1")
    assert "flamedeck.W001" not in debug.stderr  # only under --deploy, never in development


def test_check_deploy_complains_without_them(tmp_path):
    result = _manage(["check", "--deploy", "--fail-level", "WARNING"], tmp_path, DEBUG="0")
    assert result.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012"):
        assert warning in result.stderr + result.stdout


@pytest.mark.parametrize(
    "raw", ["X-Forwarded-Proto: https", "HTTP_X_FORWARDED_PROTO", "x_forwarded,https", ",https"]
)
def test_a_malformed_proxy_ssl_header_stops_start_up(monkeypatch, raw):
    monkeypatch.setenv("SECURE_PROXY_SSL_HEADER", raw)
    with pytest.raises(ImproperlyConfigured, match="SECURE_PROXY_SSL_HEADER"):
        env_proxy_ssl_header("SECURE_PROXY_SSL_HEADER")


def test_a_well_formed_proxy_ssl_header_is_read(monkeypatch):
    monkeypatch.setenv("SECURE_PROXY_SSL_HEADER", "HTTP_X_FORWARDED_PROTO, https")
    assert env_proxy_ssl_header("SECURE_PROXY_SSL_HEADER") == ("HTTP_X_FORWARDED_PROTO", "https")


def test_a_bad_hsts_value_stops_start_up(tmp_path):
    result = _manage(["check"], tmp_path, SECURE_HSTS_SECONDS="a year")
    assert result.returncode != 0 and "SECURE_HSTS_SECONDS" in result.stderr


@pytest.mark.django_db
def test_every_page_carries_a_csp_without_inline_script(teammate_client, settings):
    response = teammate_client.get(reverse("runs:run_list"))
    policy = response["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";") if part.strip())
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == f"'self' {settings.D3_FLAMEGRAPH_STYLE_HASH}"
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert directives["frame-ancestors"] == "'none'" and directives["object-src"] == "'none'"
    login = teammate_client.get(reverse("login"))
    assert "Content-Security-Policy" in login


def test_the_one_allowed_style_hash_is_the_css_d3_flame_graph_injects(settings):
    # d3-flame-graph's UMD build appends a <style> with its CSS; after an npm upgrade
    # this fails and names the new hash to put in settings.
    from config.settings import BASE_DIR

    bundle = BASE_DIR / "node_modules/d3-flame-graph/dist/d3-flamegraph.umd.min.js"
    text = bundle.read_text(encoding="utf-8")
    found = re.search(r'createElement\("style"\);(\w+)\.textContent=`([^`]*)`', text)
    assert found, "d3-flame-graph no longer injects a <style>: drop the hash"
    digest = base64.b64encode(hashlib.sha256(found.group(2).encode()).digest()).decode()
    assert settings.D3_FLAMEGRAPH_STYLE_HASH == f"'sha256-{digest}'"
