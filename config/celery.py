"""The Celery app, configured from Django settings (keys prefixed CELERY_).

Workers (one per queue kind; `make worker` / `manage.py serve --workers-only` start both,
and beat; docs/deployment.md has the per-queue commands):
    .venv/bin/celery -A config worker -Q flamedeck,flamedeck.capture --pool threads \
        --concurrency "${FLAMEDECK_CAPTURE_CONCURRENCY:-64}"
    .venv/bin/celery -A config worker -Q flamedeck.analysis --pool prefork
    .venv/bin/celery -A config beat
"""

import gc
import os

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("flamedeck")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Beat's periodic tasks are entry points above the services (profiles/beat.py).
app.autodiscover_tasks(related_name="beat")
# Regression watches: judging a capture and sending its messages (profiles/watch_tasks.py).
app.autodiscover_tasks(related_name="watch_tasks")


@signals.worker_init.connect
def freeze_startup_objects(**kwargs) -> None:
    """Move what the worker loaded at start (Django, the apps, the tasks) out of the
    garbage collector's sight: they live as long as the worker, yet every full
    collection, and the one at exit, walked them all again. Prefork children, forked
    after this, also share more pages with their parent."""
    gc.freeze()
