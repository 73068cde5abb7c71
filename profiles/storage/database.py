"""A Django Storage that keeps files in the database (`FLAMEDECK_ARTIFACTS=database`).

Why our own: django-db-file-storage, the one package for this still released, keeps
base64 text (a third larger) in a model of its own, and the others stopped years ago;
flamedeck's artifacts are already gzip-compressed blobs of a few MB, which fit a binary
column (PostgreSQL `bytea`, SQLite BLOB) directly. One row per file; names are unique.
A file is read whole into memory on open (artifacts are compressed and bounded by the
upload limit); use s3:// for very large volumes.
"""

from django.core.files.base import ContentFile, File
from django.core.files.storage import Storage
from django.utils.deconstruct import deconstructible


@deconstructible(path="profiles.storage.database.DatabaseStorage")
class DatabaseStorage(Storage):
    """Files as rows of `profiles.Artifact`; every process on the database sees them."""

    @staticmethod
    def _rows():
        from profiles.models import Artifact

        return Artifact.objects

    def _open(self, name: str, mode: str = "rb") -> File:
        if "w" in mode or "a" in mode:
            raise ValueError("DatabaseStorage files are written with save(), not open()")
        row = self._rows().filter(name=name).only("content").first()
        if row is None:
            raise FileNotFoundError(f"no stored artifact {name!r}")
        return ContentFile(bytes(row.content), name=name)

    def _save(self, name: str, content: File) -> str:
        if hasattr(content, "seek"):
            content.seek(0)
        data = b"".join(content.chunks())
        self._rows().create(name=name, content=data, size=len(data))
        return name

    def delete(self, name: str) -> None:
        self._rows().filter(name=name).delete()

    def exists(self, name: str) -> bool:
        return self._rows().filter(name=name).exists()

    def size(self, name: str) -> int:
        row = self._rows().filter(name=name).only("size").first()
        if row is None:
            raise FileNotFoundError(f"no stored artifact {name!r}")
        return row.size

    def get_modified_time(self, name: str):
        row = self._rows().filter(name=name).only("created_at").first()
        if row is None:
            raise FileNotFoundError(f"no stored artifact {name!r}")
        return row.created_at

    def listdir(self, path: str) -> tuple[list[str], list[str]]:
        prefix = path.rstrip("/") + "/" if path else ""
        dirs, files = set(), []
        for name in self._rows().filter(name__startswith=prefix).values_list("name", flat=True):
            head, sep, _ = name[len(prefix) :].partition("/")
            (dirs.add(head) if sep else files.append(head))
        return sorted(dirs), sorted(files)

    def url(self, name: str) -> str:
        raise NotImplementedError("artifacts are served by flamedeck's download views")
