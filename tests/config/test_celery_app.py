"""What the Celery app does when a worker starts."""

import gc
import os
import subprocess
import sys

from celery import signals

from config.celery import freeze_startup_objects
from tests.support.worker import ROOT


def test_a_starting_worker_freezes_what_it_loaded_so_collections_skip_it():
    """Measured on a real worker pair (docs/figures.md): stopping it took 1.1-1.5 CPU-s,
    most of it the collector's last walk over Django and the apps at exit; 0.13-0.18
    CPU-s with them frozen."""
    assert freeze_startup_objects in signals.worker_init._live_receivers(None)
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    try:
        freeze_startup_objects()
        assert gc.get_freeze_count() > 10_000  # the modules, classes and settings loaded
    finally:
        gc.unfreeze()


def test_a_starting_worker_loads_its_tasks_without_the_web_side():
    """A worker imports the apps and their tasks, not the URLconf, the views or Django
    REST framework: Celery's Django fixup ran every system check at start (and discarded
    what they found), which loaded all of them, and the capture settings' serializers sat
    in the module the services import. A third of a worker's start (docs/figures.md)."""
    code = (
        "import sys\n"
        "from config.celery import app\n"
        "app.loader.import_default_modules()\n"  # what a starting worker does
        "assert 'profiles.captures.tasks' in sys.modules\n"
        "web = ['config.urls', 'profiles.api.views', 'rest_framework.serializers',\n"
        "       'drf_spectacular.plumbing', 'django.test']\n"
        "print(sorted(m for m in web if m in sys.modules))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "CELERY_SKIP_CHECKS"}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]", done.stdout
