"""flamedeck settings, read from the environment only (see .env.example).

With nothing set: SQLite under var/ and a Celery broker on the filesystem, so
`make run` works on a machine with no database or Redis server. DATABASE_URL and
REDIS_URL switch to PostgreSQL and Redis.
"""

from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config.env import (
    env_artifacts,
    env_bool,
    env_int,
    env_list,
    env_proxy_ssl_header,
    env_str,
    env_url,
)
from config.hosts import default_allowed_hosts, default_csrf_origins

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

# The address `manage.py serve --host` (make run's HOST) binds, passed to its web server.
# Unless ALLOWED_HOSTS is set: loopback names for a loopback bind, this machine's names
# and addresses as well for HOST=0.0.0.0 or one of its addresses, and FLAMEDECK_BASE_URL's
# host either way (config.hosts; never a wildcard).
FLAMEDECK_BIND = env_str("FLAMEDECK_BIND", "127.0.0.1").strip()
_BASE_URL = env_url("FLAMEDECK_BASE_URL", ("http", "https"))
# Empty counts as unset: no Host at all would answer every request 400.
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", []) or default_allowed_hosts(FLAMEDECK_BIND, _BASE_URL)
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", []) or default_csrf_origins(_BASE_URL)
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
# Under /api/ a refused CSRF check answers JSON naming it, like every API error.
CSRF_FAILURE_VIEW = "config.api_errors.csrf_failure"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
# HTTPS behind a proxy (docs/deployment.md): all off by default so `make run` works
# on plain http://127.0.0.1.
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
# "HTTP_X_FORWARDED_PROTO,https": trust this header from the proxy (and only then).
SECURE_PROXY_SSL_HEADER = env_proxy_ssl_header("SECURE_PROXY_SSL_HEADER")
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"

D3_FLAMEGRAPH_STYLE_HASH = "'sha256-PjPkXjWPssRCMzB6p5SnF25xrwIH7ThbVHWlE+SG1DE='"
# Content-Security-Policy (django-csp): scripts, styles and everything else from this
# origin only. No inline <script>, no on*= handlers, no style="" attributes.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        # d3-flame-graph's UMD build also injects its CSS as a <style> element (the
        # same rules as the stylesheet we link); allowed by its hash only, checked
        # against node_modules by tests/config/test_hardening.py.
        "style-src": ["'self'", D3_FLAMEGRAPH_STYLE_HASH],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# Whether a host with transport "local" (commands on this very machine) may exist.
# On for `make run`, so a newcomer can capture at once; turn it off in production
# (`check --deploy` warns when it is on by default with DEBUG off).
FLAMEDECK_LOCAL_HOST = env_bool("FLAMEDECK_LOCAL_HOST", True)
# Set either way on purpose: `check --deploy` warns only about the default (config.checks).
FLAMEDECK_LOCAL_HOST_CHOSEN = bool(env_str("FLAMEDECK_LOCAL_HOST").strip())

# Login throttling (django-axes): after AXES_FAILURE_LIMIT failed logins for one
# user name from one address, that pair is locked for AXES_COOLOFF_MINUTES.
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_MINUTES = env_int("AXES_COOLOFF_MINUTES", 15, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=AXES_COOLOFF_MINUTES)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
# ... and one address is locked for every name once its failures across all names
# reach this many (runs.auth.LoginThrottleHandler; docs/security.md).
FLAMEDECK_LOGIN_IP_FAILURE_LIMIT = env_int("FLAMEDECK_LOGIN_IP_FAILURE_LIMIT", 20, minimum=1)
AXES_HANDLER = "runs.auth.LoginThrottleHandler"
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
# Proxies in front of the app: the client is the entry that many places from the
# right of X-Forwarded-For (0: REMOTE_ADDR, the only safe choice without a proxy).
FLAMEDECK_PROXY_COUNT = env_int("FLAMEDECK_PROXY_COUNT", 0, minimum=0)
AXES_CLIENT_IP_CALLABLE = "config.middleware.client_ip"
AXES_VERBOSE = False
AUTHENTICATION_BACKENDS = [
    "runs.auth.LoginThrottleBackend",
    "django.contrib.auth.backends.ModelBackend",
]

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
    "csp",
    "drf_spectacular",
    # Swagger UI's files as static files of our own origin (the CSP allows no other).
    "drf_spectacular_sidecar",
    "axes",
    "runs",
    "profiles",
    # The project above both apps: serve, bootstrap, preflight and the deploy checks.
    "config.apps.ProjectConfig",
]

MIDDLEWARE = [
    # First: an error under /api/ that any layer below answered as a page becomes JSON.
    "config.api_errors.ApiErrorMiddleware",
    "config.middleware.UploadLimitMiddleware",
    "config.middleware.RequestBodyMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "config.middleware.ValidationErrorMiddleware",
    # Last, as django-axes asks.
    "axes.middleware.AxesMiddleware",
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
        "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": VAR_DIR / "flamedeck.sqlite3"}
    }
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Whichever way SQLite is chosen (the default, or DATABASE_URL=sqlite:///…): WAL,
    # a busy timeout and write transactions that take the lock up front let the web
    # server, workers, beat and management commands write at the same time without
    # "database is locked" (a deferred transaction that upgrades to a write cannot wait).
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Celery ----------------------------------------------------------------
REDIS_URL = env_url("REDIS_URL", ("redis", "rediss"))
CELERY_BROKER_DIR = VAR_DIR / "celery"
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
else:
    for _sub in ("queue", "processed", "control"):
        (CELERY_BROKER_DIR / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://"
    # kombu's filesystem transport with atomic writes (kombu's own lets a consumer read
    # a half-written message and crash its worker under bursts: config/fs_broker.py).
    CELERY_BROKER_TRANSPORT = "config.fs_broker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_BROKER_DIR / "queue"),
        "data_folder_out": str(CELERY_BROKER_DIR / "queue"),
        "data_folder_processed": str(CELERY_BROKER_DIR / "processed"),
        # kombu's default is ./control, relative to wherever the worker was started
        "control_folder": str(CELERY_BROKER_DIR / "control"),
        # kombu polls the folder once a second by default: a whole-job capture's
        # analyses would each wait for a poll. A directory listing is cheap.
        "polling_interval": 0.1,
    }
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_QUEUE", "flamedeck")
# Waiting on remote samplers (threads pool, high concurrency) and parsing (prefork,
# one per core) run on queues of their own; everything else on the default queue.
FLAMEDECK_CAPTURE_QUEUE = f"{CELERY_TASK_DEFAULT_QUEUE}.capture"
FLAMEDECK_ANALYSIS_QUEUE = f"{CELERY_TASK_DEFAULT_QUEUE}.analysis"
# Declared, so a plain `celery -A config worker` (no -Q) consumes all three; `-Q`
# still picks some of them. Each as Celery would make it on its own: a direct
# exchange of the queue's name, routing key the name.
from kombu import Exchange, Queue  # noqa: E402 — kept in the Celery section

CELERY_TASK_QUEUES = tuple(
    Queue(name, Exchange(name, type="direct"), routing_key=name)
    for name in (CELERY_TASK_DEFAULT_QUEUE, FLAMEDECK_CAPTURE_QUEUE, FLAMEDECK_ANALYSIS_QUEUE)
)
# Threads of each capture worker (`manage.py serve`, `make worker`; give the same
# number to --concurrency when starting one by hand). A whole-job capture holds one per
# host for its whole window: a host past the free threads of every capture worker
# waits for one and starts after the group's instant (docs/deployment.md).
FLAMEDECK_CAPTURE_CONCURRENCY = env_int("FLAMEDECK_CAPTURE_CONCURRENCY", 64, minimum=1)
# Capture worker processes `manage.py serve` starts (each with the threads above): the
# work after a whole-job window (each rank's samples split and stored) runs in parallel.
FLAMEDECK_CAPTURE_WORKERS = env_int("FLAMEDECK_CAPTURE_WORKERS", 1, minimum=1)
CELERY_TASK_ROUTES = {
    "profiles.tasks.run_capture": {"queue": FLAMEDECK_CAPTURE_QUEUE},
    "profiles.tasks.run_host_captures": {"queue": FLAMEDECK_CAPTURE_QUEUE},
    "profiles.tasks.analyze_capture": {"queue": FLAMEDECK_ANALYSIS_QUEUE},
    "profiles.watch_tasks.judge_capture": {"queue": FLAMEDECK_ANALYSIS_QUEUE},
}
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
        "schedule": float(env_int("FLAMEDECK_REAP_EVERY_S", 30, minimum=1)),
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
# A queued capture no worker took this long after its last send is re-sent by the
# reaper (its message was lost); one still queued after this many seconds is failed.
FLAMEDECK_QUEUE_TIMEOUT_S = env_int("FLAMEDECK_QUEUE_TIMEOUT_S", 1800, minimum=10)
# Seconds ssh may spend connecting (TCP and SSH banner) before a host counts as unreachable.
FLAMEDECK_SSH_CONNECT_TIMEOUT_S = env_int("FLAMEDECK_SSH_CONNECT_TIMEOUT_S", 10, minimum=1)
# Extra wall-clock allowed beyond a capture's duration before py-spy is stopped.
FLAMEDECK_CAPTURE_MARGIN_S = env_int("FLAMEDECK_CAPTURE_MARGIN_S", 20, minimum=1)
# A whole-job capture samples on every host from one instant a little ahead of the
# request, learned from those hosts' last captures (profiles.jobs.schedule), and never
# more than this many seconds ahead.
FLAMEDECK_GROUP_START_WAIT_S = env_int("FLAMEDECK_GROUP_START_WAIT_S", 30, minimum=1)
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
# Each analysis runs in a child process under a time limit that grows with the file
# and a memory limit (profiles.captures.budget); past either it ends failed, naming the limit.
FLAMEDECK_ANALYSIS_TIME_S = env_int("FLAMEDECK_ANALYSIS_TIME_S", 60, minimum=1)
FLAMEDECK_ANALYSIS_S_PER_MB = env_int("FLAMEDECK_ANALYSIS_S_PER_MB", 2, minimum=0)
FLAMEDECK_ANALYSIS_MEMORY_MB = env_int("FLAMEDECK_ANALYSIS_MEMORY_MB", 2048, minimum=64)
# The dashboard's address as its users reach it: links in watch messages are absolute.
FLAMEDECK_BASE_URL = (_BASE_URL or "http://127.0.0.1:8000").rstrip("/")
# Tries of one watch message to one target before it counts as failed (backoff as
# FLAMEDECK_RETRY_BACKOFF_S).
FLAMEDECK_NOTIFY_ATTEMPTS = env_int("FLAMEDECK_NOTIFY_ATTEMPTS", 5, minimum=1)
# A thread-state rules file the analysis worker puts ahead of the built-in table
# (docs/states.md); empty: the built-in table only.
FLAMEDECK_STATE_RULES = env_str("FLAMEDECK_STATE_RULES").strip()

# --- static and media ------------------------------------------------------
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
# Only the browser packages (npm dependencies), not the dev tools beside them.
STATICFILES_DIRS = [
    BASE_DIR / "static",
    *((f"npm/{name}", BASE_DIR / "node_modules" / name) for name in ("d3", "d3-flame-graph")),
]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "compressor.finders.CompressorFinder",
]
COMPRESS_ENABLED = True
COMPRESS_OFFLINE = env_bool("COMPRESS_OFFLINE", False)
COMPRESS_ROOT = STATIC_ROOT
WHITENOISE_USE_FINDERS = True
# Hashed names (collectstatic's manifest and compressor's CACHE/ bundles both use 12
# hex digits) never change content: cache them for ten years.
WHITENOISE_IMMUTABLE_FILE_TEST = r"\.[0-9a-f]{12}\.\w+$"
# Without offline compression, bundles appear at run time; let WhiteNoise see them.
WHITENOISE_AUTOREFRESH = DEBUG or not COMPRESS_OFFLINE
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(VAR_DIR / "media")))
MEDIA_URL = "media/"
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
# Larger uploads stream to a temporary file instead of memory.
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
# Bodies over this are refused with 413 before they are read (config.middleware).
FLAMEDECK_MAX_UPLOAD_MB = env_int("FLAMEDECK_MAX_UPLOAD_MB", 512, minimum=1)
# Where capture artifacts (raw samples, logs, flamegraph trees, exports) live:
# filesystem (one machine), database, or s3://bucket/prefix (every machine reads them).
FLAMEDECK_ARTIFACTS = env_str("FLAMEDECK_ARTIFACTS", "filesystem").strip() or "filesystem"
STORAGES = {
    "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(MEDIA_ROOT)},
    },
    # Hashed names and far-future cache headers once `collectstatic` has run
    # (production); the plain storage otherwise, so `make run` and tests need no step.
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if COMPRESS_OFFLINE
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
    "artifacts": env_artifacts("FLAMEDECK_ARTIFACTS", str(MEDIA_ROOT)),
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Token first, so a missing or bad token answers 401 with WWW-Authenticate.
        "runs.auth.HashedTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON first, so `*/*` and no Accept header get JSON; a browser (text/html) gets the
    # same JSON on a page with the API reference's link (config.api_html).
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "config.api_html.JSONPageRenderer",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
    "EXCEPTION_HANDLER": "config.api_errors.exception_handler",
}
# The OpenAPI 3 schema at /api/schema/ and its reference page at /api/docs/ (config.api_docs).
SPECTACULAR_SETTINGS = {
    "TITLE": "flamedeck API",
    "DESCRIPTION": (
        "Profile distributed training jobs with py-spy: hosts, runs and their processes, "
        "captures and their evidence, whole-job captures, comparisons. Authenticate with "
        "a session (the dashboard's login; writes then need the X-CSRFToken header) or "
        "`Authorization: Token <key>` (`manage.py create_api_token USERNAME`). Anonymous "
        "requests get 401 or 403. Writes need the operators group; hosts' connection "
        "fields need host admins."
    ),
    "VERSION": "1",
    # The schema describes the API, not its own endpoints (/api/schema/, /api/docs/).
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SERVE_AUTHENTICATION": None,
    # Bodies are JSON (imports: multipart, declared where they are taken); responses JSON.
    "PARSER_WHITELIST": ["rest_framework.parsers.JSONParser"],
    "RENDERER_WHITELIST": ["rest_framework.renderers.JSONRenderer"],
    "COMPONENT_SPLIT_REQUEST": True,
    # Enums by the code that defines them (a field name alone is ambiguous: `status`).
    "ENUM_NAME_OVERRIDES": {
        "CaptureStatusEnum": "profiles.models.Capture.Status",
        "CaptureKindEnum": "profiles.models.Capture.Kind",
        "GroupStatusEnum": "profiles.api.schema.GROUP_STATUSES",
        "GroupKindEnum": "profiles.api.schema.GROUP_KINDS",
        "DumpKindEnum": "profiles.api.schema.DUMP_KIND",
        "RequestKindEnum": "runs.capture_settings.KINDS",
        "RunStatusEnum": "runs.models.Run.Status",
        "ThreadStateEnum": "profiles.pyspy.STATES",
        "LagVerdictEnum": "profiles.api.schema.LAG_VERDICTS",
        "ChangeVerdictEnum": "profiles.api.schema.CHANGE_VERDICTS",
        "StacksKindEnum": "profiles.api.schema.STACKS_KINDS",
        "RowKindEnum": "profiles.watches.api_schema.ROW_KINDS",
        "JudgementVerdictEnum": "profiles.watches.models.Judgement.Verdict",
        "AlertStatusEnum": "profiles.watches.models.Alert.Status",
        "DeliveryStatusEnum": "profiles.watches.models.Delivery.Status",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "config.api_schema.finish",
    ],
}
# API tokens from `manage.py create_api_token` expire after this many days (0 = never).
FLAMEDECK_TOKEN_DAYS = env_int("FLAMEDECK_TOKEN_DAYS", 90, minimum=0)

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
