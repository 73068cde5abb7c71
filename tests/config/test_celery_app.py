"""What the Celery app does when a worker starts."""

import gc

from celery import signals

from config.celery import freeze_startup_objects


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
