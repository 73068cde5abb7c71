"""The Celery app, configured from Django settings (keys prefixed CELERY_).

Workers (one per queue kind; `make worker` / `manage.py serve --workers-only` start both,
and beat; docs/deployment.md has the per-queue commands):
    .venv/bin/celery -A config worker -Q flamedeck,flamedeck.capture --pool threads \
        --concurrency "${FLAMEDECK_CAPTURE_CONCURRENCY:-64}" --disable-prefetch
    .venv/bin/celery -A config worker -Q flamedeck.analysis --pool prefork
    .venv/bin/celery -A config beat
"""

import gc
import os

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Workers and beat skip Django's system checks. Celery's Django fixup runs them all as a
# worker starts and discards what they find; running them imported the URLconf, every
# view, every template tag library and Django REST framework, none of which a worker
# uses: a third of its start (docs/figures.md). `manage.py serve`, `check` and
# `preflight` (which `make run` runs first) still run every check.
os.environ.setdefault("CELERY_SKIP_CHECKS", "1")

app = Celery("flamedeck")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Beat's periodic tasks are entry points above the services (profiles/captures/beat.py).
app.autodiscover_tasks(related_name="beat")
# Regression watches: judging a capture and sending its messages (profiles/watches/tasks.py).
app.autodiscover_tasks(related_name="watch_tasks")


@signals.worker_init.connect
def freeze_startup_objects(**kwargs) -> None:
    """Move what the worker loaded at start (Django, the apps, the tasks) out of the
    garbage collector's sight: they live as long as the worker, yet every full
    collection, and the one at exit, walked them all again. Prefork children, forked
    after this, also share more pages with their parent."""
    gc.freeze()
