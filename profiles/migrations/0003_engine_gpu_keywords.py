"""Refine the default "GPU training" keyword set of existing installs.

Only a set still holding exactly the original default keywords is changed, so a
team's own edits are kept. The lists are frozen here (not imported from the
engine) so this migration means the same thing whenever it runs.
"""

from django.db import migrations

SET_NAME = "GPU training"
OLD = [
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
    ("host sync", "item"),
    ("comm", "nccl"),
    ("mask", "create_block_mask"),
    ("wait", "sched_yield"),
    ("wait", "futex"),
    ("wait", "pthread_cond"),
    ("python queue", "queue"),
    ("gil", "take_gil"),
]
COND_WAIT = "re:^pthread_cond_(timed|clock)?wait"
NEW = [
    ("gil", "=take_gil"),
    ("gil", "=drop_gil"),
    ("gil", "=PyEval_RestoreThread"),
    ("gil", "=PyEval_AcquireThread"),
    ("gil", "gil_scoped_"),
    ("gil", f"{COND_WAIT} under python"),
    ("gil", f"{COND_WAIT} under re:gil_scoped_"),
    ("gil", f"{COND_WAIT} under libtorch_python"),
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
    ("wait", COND_WAIT),
    ("python queue", "queue"),
]


def _replace(apps, old, new):
    KeywordSet = apps.get_model("profiles", "KeywordSet")
    Keyword = apps.get_model("profiles", "Keyword")
    for keyword_set in KeywordSet.objects.filter(name=SET_NAME):
        # The manager, not the reverse accessor: a historical model rendered while
        # unapplying a later migration may lack `keyword_set.keywords`.
        rows = Keyword.objects.filter(keyword_set_id=keyword_set.pk).order_by("position", "id")
        if [(k.category, k.keyword) for k in rows] != old:
            continue
        rows.delete()
        Keyword.objects.bulk_create(
            Keyword(keyword_set_id=keyword_set.pk, position=i, category=c, keyword=k)
            for i, (c, k) in enumerate(new)
        )


def forwards(apps, schema_editor):
    _replace(apps, OLD, NEW)


def backwards(apps, schema_editor):
    _replace(apps, NEW, OLD)


class Migration(migrations.Migration):
    dependencies = [("profiles", "0002_capture_threads_file")]

    operations = [migrations.RunPython(forwards, backwards)]
