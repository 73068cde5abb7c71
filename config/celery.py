"""The Celery app, configured from Django settings (keys prefixed CELERY_).

Worker: `.venv/bin/celery -A config worker -l info`
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("flamedeck")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
