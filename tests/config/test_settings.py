"""Settings come from the environment only, default to services-free parts, and
fail with one line naming the variable."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_int, env_url

ROOT = Path(__file__).resolve().parents[2]


def _manage(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    clean.update(DJANGO_SETTINGS_MODULE="config.settings", FLAMEDECK_VAR_DIR=str(tmp_path), **env)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_it_reads_booleans_and_refuses_anything_else(monkeypatch):
    monkeypatch.setenv("FLAG", "yes")
    assert env_bool("FLAG") is True
    monkeypatch.setenv("FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="FLAG='maybe' is not a boolean"):
        env_bool("FLAG")


def test_it_refuses_an_integer_below_its_minimum(monkeypatch):
    monkeypatch.setenv("N", "2")
    with pytest.raises(ImproperlyConfigured, match="N=2 must be at least 5"):
        env_int("N", 10, minimum=5)
    monkeypatch.setenv("N", "ten")
    with pytest.raises(ImproperlyConfigured, match="N='ten' is not an integer"):
        env_int("N", 10)


def test_it_refuses_a_database_url_with_a_wrong_scheme(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "mysq://db/x")
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL='mysq://db/x': scheme"):
        env_url("DATABASE_URL", ("postgres", "postgresql", "sqlite"))


def test_with_nothing_set_it_uses_sqlite_under_var_and_a_filesystem_broker(tmp_path):
    code = (
        "from django.conf import settings as s; "
        "db = s.DATABASES['default']; "
        "print(db['ENGINE'], db['NAME'], s.CELERY_BROKER_URL)"
    )
    result = _manage(["shell", "-c", code], tmp_path)
    assert result.returncode == 0, result.stderr
    engine, name, broker = result.stdout.strip().splitlines()[-1].split()
    assert engine == "django.db.backends.sqlite3"
    assert name == str(tmp_path / "flamedeck.sqlite3")
    assert broker == "filesystem://"
    assert (tmp_path / "celery" / "queue").is_dir()


@pytest.mark.parametrize("url", [None, "sqlite:///{tmp}/other.sqlite3"])
def test_sqlite_waits_for_the_lock_in_wal_mode_however_it_is_chosen(tmp_path, url):
    """The embedded default and DATABASE_URL=sqlite:///… (what test and bench workers
    use) both get WAL, a busy timeout and IMMEDIATE write transactions."""
    code = (
        "from django.db import connection; "
        "connection.ensure_connection(); c = connection.cursor(); "
        "c.execute('PRAGMA journal_mode'); "
        "print(c.fetchone()[0], connection.settings_dict['OPTIONS']['timeout'], "
        "connection.settings_dict['OPTIONS']['transaction_mode'])"
    )
    env = {"DATABASE_URL": url.format(tmp=tmp_path)} if url else {}
    result = _manage(["shell", "-c", code], tmp_path, **env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1].split() == ["wal", "20", "IMMEDIATE"]


def test_database_and_redis_urls_switch_to_postgresql_and_redis(tmp_path):
    code = (
        "from django.conf import settings as s; "
        "print(s.DATABASES['default']['ENGINE'], s.CELERY_BROKER_URL)"
    )
    result = _manage(
        ["shell", "-c", code],
        tmp_path,
        DATABASE_URL="postgres://u@127.0.0.1:5432/x",
        REDIS_URL="redis://127.0.0.1:6379/3",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1].split() == [
        "django.db.backends.postgresql",
        "redis://127.0.0.1:6379/3",
    ]


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"DATABASE_URL": "mysq://db/x"}, "DATABASE_URL="),
        ({"DEBUG": "perhaps"}, "DEBUG='perhaps' is not a boolean"),
        ({"FLAMEDECK_HEARTBEAT_TIMEOUT_S": "soon"}, "FLAMEDECK_HEARTBEAT_TIMEOUT_S="),
    ],
)
def test_a_settings_typo_gives_one_line_naming_the_variable(tmp_path, env, needle):
    result = _manage(["check"], tmp_path, **env)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert needle in lines[0]
    assert "Traceback" not in result.stderr


def test_an_unreachable_database_or_redis_is_one_clear_line(tmp_path):
    result = _manage(["preflight"], tmp_path, DATABASE_URL="postgres://u@127.0.0.1:1/x")
    assert result.returncode != 0
    assert "DATABASE_URL: cannot connect to the database" in result.stderr
    assert "Traceback" not in result.stderr
    result = _manage(["preflight"], tmp_path, REDIS_URL="redis://127.0.0.1:1/0")
    assert result.returncode != 0
    assert "REDIS_URL: cannot reach Redis at redis://127.0.0.1:1/0" in result.stderr
    assert "Traceback" not in result.stderr


def test_flamedeck_artifacts_picks_the_storage_and_refuses_anything_else(monkeypatch, tmp_path):
    from config.env import env_artifacts

    monkeypatch.delenv("FLAMEDECK_ARTIFACTS", raising=False)
    assert env_artifacts("FLAMEDECK_ARTIFACTS", "/m")["OPTIONS"] == {"location": "/m"}
    monkeypatch.setenv("FLAMEDECK_ARTIFACTS", "database")
    assert env_artifacts("FLAMEDECK_ARTIFACTS", "/m")["BACKEND"].endswith("DatabaseStorage")
    monkeypatch.setenv("FLAMEDECK_ARTIFACTS", "s3://traces/team-a/flamedeck")
    monkeypatch.setenv("AWS_S3_ENDPOINT_URL", "http://127.0.0.1:9000")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    s3 = env_artifacts("FLAMEDECK_ARTIFACTS", "/m")
    assert s3["BACKEND"] == "storages.backends.s3.S3Storage"
    assert s3["OPTIONS"]["bucket_name"] == "traces"
    assert s3["OPTIONS"]["location"] == "team-a/flamedeck"
    assert s3["OPTIONS"]["endpoint_url"] == "http://127.0.0.1:9000"
    assert s3["OPTIONS"]["region_name"] == "eu-west-1"
    result = _manage(["check"], tmp_path, FLAMEDECK_ARTIFACTS="nfs")
    assert result.returncode != 0
    assert "FLAMEDECK_ARTIFACTS='nfs': use filesystem, database or s3://bucket/prefix" in (
        result.stderr
    )


def test_preflight_names_unbuilt_static_files_and_unreachable_s3_in_one_line(tmp_path):
    result = _manage(["preflight"], tmp_path, COMPRESS_OFFLINE="1")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "COMPRESS_OFFLINE=1 but the static files" in result.stderr
    assert "run `make static`" in result.stderr
    s3 = {
        "FLAMEDECK_ARTIFACTS": "s3://traces/flamedeck",
        "AWS_S3_ENDPOINT_URL": "http://127.0.0.1:1",
        "AWS_ACCESS_KEY_ID": "k",
        "AWS_SECRET_ACCESS_KEY": "s",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_MAX_ATTEMPTS": "1",
    }
    result = _manage(["preflight"], tmp_path, **s3)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "FLAMEDECK_ARTIFACTS=s3://traces/flamedeck: cannot reach it" in result.stderr
