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
