"""Default keywords that mean what they say, for existing installs (issues 17, 19).

`gil_scoped_` matched the template arguments of pybind11 wrappers around c10d calls,
so collective waits read as GIL waits; `malloc`/`free` matched file paths and other
symbols; `comm` knew only NCCL. Only a "GPU training" set still holding exactly the
previous defaults (0003's) is changed, so a team's own edits are kept. The lists are
frozen here (not imported from the engine) so this migration always means the same.
"""

from django.db import migrations

SET_NAME = "GPU training"
COND_WAIT = "re:^pthread_cond_(timed|clock)?wait"
GIL_GUARDS = "re:^pybind11::gil_scoped_(release::~gil_scoped_release|acquire::gil_scoped_acquire)$"
OLD = [
    ("gil", "=take_gil"),
    ("gil", "=drop_gil"),
    ("gil", "=PyEval_RestoreThread"),
    ("gil", "=PyEval_AcquireThread"),
    ("gil", "gil_scoped_"),
    ("gil", "re:^pthread_cond_(timed|clock)?wait under python"),
    ("gil", "re:^pthread_cond_(timed|clock)?wait under re:gil_scoped_"),
    ("gil", "re:^pthread_cond_(timed|clock)?wait under libtorch_python"),
    ("launch", "cuLaunchKernel"),
    ("launch", "cudaLaunchKernel"),
    ("sync", "cuStreamSynchronize"),
    ("sync", "cudaStreamSynchronize"),
    ("sync", "cuEventSynchronize"),
    ("sync", "cudaDeviceSynchronize"),
    ("alloc", "CUDACachingAllocator"),
    ("alloc", "malloc"),
    ("alloc", "free"),
    ("copy", "cudaMemcpy"),
    ("copy", "cuMemcpy"),
    ("host sync", "_local_scalar_dense"),
    ("host sync", "re:(^|[.:]|THPVariable_)item$"),
    ("comm", "nccl"),
    ("mask", "create_block_mask"),
    ("wait", "sched_yield"),
    ("wait", "futex"),
    ("wait", "re:^pthread_cond_(timed|clock)?wait"),
    ("python queue", "queue"),
]
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


def _replace(apps, old, new):
    KeywordSet = apps.get_model("profiles", "KeywordSet")
    Keyword = apps.get_model("profiles", "Keyword")
    for keyword_set in KeywordSet.objects.filter(name=SET_NAME):
        rows = keyword_set.keywords.order_by("position", "id")
        if [(k.category, k.keyword) for k in rows] != old:
            continue
        keyword_set.keywords.all().delete()
        Keyword.objects.bulk_create(
            Keyword(keyword_set=keyword_set, position=i, category=c, keyword=k)
            for i, (c, k) in enumerate(new)
        )


def forwards(apps, schema_editor):
    _replace(apps, OLD, NEW)


def backwards(apps, schema_editor):
    _replace(apps, NEW, OLD)


class Migration(migrations.Migration):
    dependencies = [("profiles", "0010_operator_permission_label")]

    operations = [migrations.RunPython(forwards, backwards)]
