"""The storage every capture artifact goes through (FLAMEDECK_ARTIFACTS).

Capture FileFields take `artifact_storage` as their (callable) storage, so raw samples,
logs, flamegraph trees, thread tables and exports are read and written through
`STORAGES["artifacts"]`: the local disk, the database or S3-compatible object storage.
"""

from django.core.files.storage import Storage, storages
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.functional import LazyObject, empty


class _ArtifactStorage(LazyObject):
    def _setup(self) -> None:
        self._wrapped = storages["artifacts"]


_storage = _ArtifactStorage()


def artifact_storage() -> Storage:
    return _storage  # type: ignore[return-value]


@receiver(setting_changed)
def _forget_storage(*, setting: str, **kwargs) -> None:
    # Tests switch backends with override_settings(STORAGES=...).
    if setting in ("STORAGES", "MEDIA_ROOT"):
        _storage._wrapped = empty


ARTIFACT_FIELDS = ("raw_file", "log_file", "flamegraph_file", "threads_file", "export_file")


def storage_for(spec: str) -> Storage:
    """A storage for a FLAMEDECK_ARTIFACTS value (filesystem, database, s3://…)."""
    from django.conf import settings
    from django.utils.module_loading import import_string

    from config.env import artifacts_storage

    config = artifacts_storage(spec, str(settings.MEDIA_ROOT))
    return import_string(config["BACKEND"])(**config.get("OPTIONS", {}))


def artifacts_move(*, source: Storage, destination: Storage, keep: bool = False) -> dict[str, int]:
    """Copy every capture's files from `source` to `destination` under the same names,
    then delete them from `source` (unless `keep`). Files already at the destination
    are left alone, so an interrupted move can simply be run again."""
    from .models import Capture

    counts = {"moved": 0, "already_there": 0, "missing": 0}
    for capture in Capture.objects.only(*ARTIFACT_FIELDS).iterator():
        for name in filter(None, (getattr(capture, f).name for f in ARTIFACT_FIELDS)):
            counts[_move_one(name, source, destination, keep)] += 1
    return counts


def _move_one(name: str, source: Storage, destination: Storage, keep: bool) -> str:
    if destination.exists(name):
        outcome = "already_there"
    elif not source.exists(name):
        return "missing"
    else:
        with source.open(name, "rb") as fh:
            saved = destination.save(name, fh)
        if saved != name:
            raise RuntimeError(f"{name}: the destination stored it as {saved}")
        outcome = "moved"
    if not keep and source.exists(name):
        source.delete(name)
    return outcome
