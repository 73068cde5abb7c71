"""Test settings: real PostgreSQL and Redis when they answer on their standard local
ports, otherwise the embedded default; under CI (`CI` set) they must answer."""

import os
import tempfile

from django.core.exceptions import ImproperlyConfigured

from config.env import local_port_answers

for variable, port, url in (
    ("DATABASE_URL", 5432, "postgres://postgres@127.0.0.1:5432/flamedeck"),
    ("REDIS_URL", 6379, "redis://127.0.0.1:6379/15"),
):
    if variable in os.environ:
        continue
    if local_port_answers(port):
        os.environ[variable] = url
    elif os.environ.get("CI"):
        # CI must test on the real services, never pass on the embedded fallbacks.
        raise ImproperlyConfigured(f"CI: nothing answers on 127.0.0.1:{port} for {variable}")
# A queue and a var dir of its own, so no message from an earlier run, or from another
# test process, reaches this process's workers. pytest-xdist's workers inherit the
# controller's environment: a worker drops what it inherited and sets its own, and
# the processes a test starts (Celery workers, `manage.py`) inherit their worker's.
_OWNER = os.environ.get("PYTEST_XDIST_WORKER", "main")
if os.environ.get("FLAMEDECK_TEST_OWNER", _OWNER) != _OWNER:
    for inherited in ("CELERY_QUEUE", "FLAMEDECK_VAR_DIR"):
        os.environ.pop(inherited, None)
os.environ["FLAMEDECK_TEST_OWNER"] = _OWNER
os.environ.setdefault("CELERY_QUEUE", f"flamedeck-test-{os.getpid()}")
os.environ.setdefault("FLAMEDECK_VAR_DIR", tempfile.mkdtemp(prefix="flamedeck-test-"))

from config.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Sessions are written to PostgreSQL as in production and read from this process's
# cache: reading one from the database was 18% of a request in the URL walks. Only this
# process and its live server's threads use these settings; the servers and workers a
# test starts use config.settings, sessions in the database.
SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"
CELERY_TASK_ALWAYS_EAGER = False
COMPRESS_OFFLINE = False
DEBUG = False

if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # A file, not memory, so a real worker process can share the test database.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}
else:
    # One database per test process, so parallel runs (CI, several checkouts) never
    # drop each other's database.
    DATABASES["default"]["TEST"] = {"NAME": f"test_flamedeck_{os.getpid()}"}
    # A test database need not survive a crash of the server: this process's commits
    # (the flush after each transactional test above all) do not wait for the WAL to
    # reach the disk. The workers and commands a test starts run on config.settings.
    DATABASES["default"].setdefault("OPTIONS", {})["options"] = "-c synchronous_commit=off"

# django-axes logs every login (force_login included) at INFO; keep test output readable.
LOGGING["loggers"] = {"axes": {"level": "WARNING"}}
