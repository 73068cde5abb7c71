"""Default keywords that mean what they say, for existing installs (issues 17, 19).

`gil_scoped_` matched the template arguments of pybind11 wrappers around c10d calls,
so collective waits read as GIL waits; `malloc`/`free` matched file paths and other
symbols; `comm` knew only NCCL. Only a "GPU training" set still holding exactly the
previous defaults (0003's) is changed, so a team's own edits are kept. The lists are
frozen here (not imported from the engine) so this migration always means the same.
"""

import importlib

from django.db import migrations

SET_NAME = "GPU training"
COND_WAIT = "re:^pthread_cond_(timed|clock)?wait"
GIL_GUARDS = "re:^pybind11::gil_scoped_(release::~gil_scoped_release|acquire::gil_scoped_acquire)$"
# 0003's result, frozen there.
_PREVIOUS = importlib.import_module("profiles.migrations.0003_engine_gpu_keywords")
OLD = _PREVIOUS.NEW
NEW = [
    ("gil", "=take_gil"),
    ("gil", "=drop_gil"),
    ("gil", "=PyEval_RestoreThread"),
    ("gil", "=PyEval_AcquireThread"),
    ("gil", GIL_GUARDS),
    ("gil", "re:^pthread_cond_(timed|clock)?wait under python"),
    (
        "gil",
        f"{COND_WAIT} under {GIL_GUARDS}",
    ),
    ("gil", "re:^pthread_cond_(timed|clock)?wait under libtorch_python"),
    ("launch", "cuLaunchKernel"),
    ("launch", "cudaLaunchKernel"),
    ("sync", "cuStreamSynchronize"),
    ("sync", "cudaStreamSynchronize"),
    ("sync", "cuEventSynchronize"),
    ("sync", "cudaDeviceSynchronize"),
    ("alloc", "CUDACachingAllocator"),
    ("alloc", "=malloc"),
    ("alloc", "=free"),
    ("alloc", "=calloc"),
    ("alloc", "=realloc"),
    ("alloc", "=posix_memalign"),
    ("alloc", "re:^cuda(Malloc|Free)"),
    ("alloc", "re:^cuMem(Alloc|Free)"),
    ("copy", "cudaMemcpy"),
    ("copy", "cuMemcpy"),
    ("host sync", "_local_scalar_dense"),
    ("host sync", "re:(^|[.:]|THPVariable_)item$"),
    ("comm", "nccl"),
    ("comm", "re:^c10d::"),
    ("comm", "re:^gloo::"),
    ("mask", "create_block_mask"),
    ("wait", "sched_yield"),
    ("wait", "futex"),
    ("wait", "re:^pthread_cond_(timed|clock)?wait"),
    ("python queue", "queue"),
]


# The same replacement as 0003's (a set edited by its team is left alone).
_replace = _PREVIOUS._replace


def forwards(apps, schema_editor):
    _replace(apps, OLD, NEW)


def backwards(apps, schema_editor):
    _replace(apps, NEW, OLD)


class Migration(migrations.Migration):
    dependencies = [("profiles", "0011_regression_watches")]

    operations = [migrations.RunPython(forwards, backwards)]
