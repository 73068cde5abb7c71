"""flamedeck settings, read from the environment only (see .env.example).

With nothing set: SQLite under var/ and a Celery broker on the filesystem, so
`make run` works on a machine with no database or Redis server. DATABASE_URL and
REDIS_URL switch to PostgreSQL and Redis.
"""

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_int, env_list, env_str, env_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("FLAMEDECK_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    # A per-checkout key, generated once, so the embedded default needs no setup
    # and never ships a shared secret.
    _key_file = VAR_DIR / "secret_key"
    if not _key_file.exists():
        from django.core.management.utils import get_random_secret_key

        VAR_DIR.mkdir(parents=True, exist_ok=True)
        _key_file.write_text(get_random_secret_key())
        _key_file.chmod(0o600)
    SECRET_KEY = _key_file.read_text().strip()

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "compressor",
    "runs",
    "profiles",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "runs:run_list"
LOGOUT_REDIRECT_URL = "login"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- database -------------------------------------------------------------
DATABASE_URL = env_url("DATABASE_URL", ("postgres", "postgresql", "sqlite"))
if DATABASE_URL:
    try:
        DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_URL: {exc}") from None
else:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "flamedeck.sqlite3",
            # WAL and a busy timeout let the web server and the embedded worker
            # write at the same time without "database is locked".
            "OPTIONS": {
                "timeout": 20,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
            },
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Celery ----------------------------------------------------------------
REDIS_URL = env_url("REDIS_URL", ("redis", "rediss"))
CELERY_BROKER_DIR = VAR_DIR / "celery"
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
else:
    for _sub in ("queue", "processed"):
        (CELERY_BROKER_DIR / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_BROKER_DIR / "queue"),
        "data_folder_out": str(CELERY_BROKER_DIR / "queue"),
        "data_folder_processed": str(CELERY_BROKER_DIR / "processed"),
    }
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_QUEUE", "flamedeck")
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_WORKER_SEND_TASK_EVENTS = False
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE = {
    "reap-lost-captures": {
        "task": "profiles.tasks.reap_lost_captures",
        "schedule": 30.0,
    },
    "schedule-captures": {
        "task": "profiles.tasks.schedule_captures",
        "schedule": float(env_int("FLAMEDECK_SCHEDULE_TICK_S", 30, minimum=1)),
    },
    "prune-raw-files": {"task": "profiles.tasks.prune_raw_files", "schedule": 3600.0},
}

# --- flamedeck ---------------------------------------------------------------
# Seconds without a heartbeat after which a running capture counts as lost.
FLAMEDECK_HEARTBEAT_TIMEOUT_S = env_int("FLAMEDECK_HEARTBEAT_TIMEOUT_S", 60, minimum=5)
# Extra wall-clock allowed beyond a capture's duration before py-spy is stopped.
FLAMEDECK_CAPTURE_MARGIN_S = env_int("FLAMEDECK_CAPTURE_MARGIN_S", 20, minimum=1)
# Transient failures (host unreachable) are retried this often, with jittered backoff.
FLAMEDECK_CAPTURE_RETRIES = env_int("FLAMEDECK_CAPTURE_RETRIES", 3, minimum=0)
FLAMEDECK_RETRY_BACKOFF_S = env_int("FLAMEDECK_RETRY_BACKOFF_S", 5, minimum=0)
# Scheduled captures sample this long, at this rate.
FLAMEDECK_SCHEDULE_DURATION_S = env_int("FLAMEDECK_SCHEDULE_DURATION_S", 30, minimum=1)
FLAMEDECK_SCHEDULE_RATE = env_int("FLAMEDECK_SCHEDULE_RATE", 20, minimum=1)
FLAMEDECK_MAX_DURATION_S = env_int("FLAMEDECK_MAX_DURATION_S", 600, minimum=1)
# An ssh client config passed as -F (None: the worker user's ~/.ssh/config).
FLAMEDECK_SSH_CONFIG = env_str("FLAMEDECK_SSH_CONFIG") or None
FLAMEDECK_KNOWN_HOSTS = env_str("FLAMEDECK_KNOWN_HOSTS") or None
# Disk budget for raw capture files, enforced by `manage.py prune_raw`.
FLAMEDECK_RAW_BUDGET_MB = env_int("FLAMEDECK_RAW_BUDGET_MB", 5000, minimum=1)
FLAMEDECK_FLAMEGRAPH_NODES = env_int("FLAMEDECK_FLAMEGRAPH_NODES", 20000, minimum=100)

# --- static and media ------------------------------------------------------
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATICFILES_DIRS = [BASE_DIR / "static", ("npm", BASE_DIR / "node_modules")]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "compressor.finders.CompressorFinder",
]
COMPRESS_ENABLED = True
COMPRESS_OFFLINE = env_bool("COMPRESS_OFFLINE", False)
COMPRESS_ROOT = STATIC_ROOT
WHITENOISE_USE_FINDERS = True
# Without offline compression, bundles appear at run time; let WhiteNoise see them.
WHITENOISE_AUTOREFRESH = DEBUG or not COMPRESS_OFFLINE
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(VAR_DIR / "media")))
MEDIA_URL = "media/"
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Token first, so a missing or bad token answers 401 with WWW-Authenticate.
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "UNAUTHENTICATED_USER": None,
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}
