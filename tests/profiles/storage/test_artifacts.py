"""Artifact backends (FLAMEDECK_ARTIFACTS): every read and write of capture files goes
through the configured storage; prune_raw works on each; move_artifacts moves them, and
an interrupted move resumes without losing a file. S3 is a real S3-compatible server
(SeaweedFS, started by the test session)."""

import gzip
import io

import pytest
from django.core.files.base import ContentFile, File
from django.core.files.storage import FileSystemStorage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from profiles.captures import services
from profiles.models import Artifact, Capture
from profiles.storage.artifacts import ARTIFACT_FIELDS, artifact_storage
from profiles.storage.move import MoveFailed, artifacts_move, file_digest, storage_for
from tests.config.test_settings import _manage

pytestmark = pytest.mark.django_db

RAW = (
    "thread (11): MainThread;train (train.py:10);cuStreamSynchronize (libcuda.so.1) 60\n"
    "thread (12): loader;load (data.py:5);cudaMemcpy (libcudart.so) 40\n"
)


def _backend(spec: str, media_root) -> dict:
    from config.env import artifacts_storage

    return artifacts_storage(spec, str(media_root))


@pytest.fixture
def s3(monkeypatch, s3_server):
    """A prefix of its own on the real S3 server (SeaweedFS) the session started."""
    for name, value in s3_server.environment().items():
        monkeypatch.setenv(name, value)
    return s3_server.new_spec()


@pytest.fixture(params=["filesystem", "database", "s3"])
def backend(request, settings, tmp_path):
    spec = request.getfixturevalue("s3") if request.param == "s3" else request.param
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.STORAGES = {**settings.STORAGES, "artifacts": _backend(spec, tmp_path / "media")}
    return request.param


def _import(raw: str = RAW) -> Capture:
    upload = SimpleUploadedFile("samples.txt", raw.encode())
    log = SimpleUploadedFile("py-spy.log", b"py-spy> Sampling process 100 times a second\n")
    return services.capture_import(user=None, file=upload, log=log)


def _names(capture: Capture) -> list[str]:
    return [getattr(capture, f).name for f in ARTIFACT_FIELDS if getattr(capture, f)]


def test_every_artifact_of_a_capture_lives_in_the_configured_backend(backend, owner_client):
    capture = _import()
    assert capture.status == "done", capture.error
    storage = artifact_storage()
    assert len(_names(capture)) == 5 and all(storage.exists(n) for n in _names(capture))
    with storage.open(capture.raw_file.name) as fh:
        assert gzip.decompress(fh.read()).decode() == RAW
    folded = owner_client.get(f"/captures/{capture.pk}/download/folded/")
    assert b"".join(folded.streaming_content).decode() == RAW
    speedscope = owner_client.get(f"/captures/{capture.pk}/download/speedscope/")
    assert b'"$schema"' in b"".join(speedscope.streaming_content)
    assert owner_client.get(f"/api/captures/{capture.pk}/flamegraph/").json()["value"] == 100
    if backend != "database":
        assert not Artifact.objects.exists()


def test_prune_raw_deletes_the_oldest_raw_samples_and_their_export_on_every_backend(
    backend, owner_client
):
    old, new = _import(), _import()
    storage = artifact_storage()
    budget = Capture.objects.get(pk=new.pk).raw_size  # room for one raw file
    call_command("prune_raw", "--budget-mb", str(budget / 1024 / 1024))
    old.refresh_from_db()
    assert old.raw_pruned_at and not old.raw_file and not old.export_file
    gone = [n for n in _names(Capture.objects.get(pk=new.pk)) if "samples" in n or "export" in n]
    assert not storage.exists(gone[0].replace(f"/{new.pk}/", f"/{old.pk}/"))
    assert all(storage.exists(n) for n in _names(Capture.objects.get(pk=new.pk)))
    assert owner_client.get(f"/captures/{old.pk}/download/speedscope/").status_code == 404
    tree = owner_client.get(f"/api/captures/{old.pk}/flamegraph/").json()
    assert tree["value"] == 100  # pages keep working without the raw file
    thread = owner_client.get(f"/api/captures/{old.pk}/", {"thread": "loader"}).json()
    assert thread["stats"]["total_samples"] == 40


def test_captures_keep_working_after_moving_their_artifacts_to_another_backend(
    settings, tmp_path, owner_client, s3
):
    media = tmp_path / "media"
    settings.MEDIA_ROOT = media
    settings.STORAGES = {**settings.STORAGES, "artifacts": _backend("filesystem", media)}
    captures = [_import(), _import()]
    assert len([p for p in media.rglob("*") if p.is_file()]) == 10
    for spec in ("database", s3, "filesystem"):
        source = settings.STORAGES["artifacts"]
        settings.STORAGES = {**settings.STORAGES, "artifacts": _backend(spec, media)}
        assert not artifact_storage().exists(captures[0].flamegraph_file.name)  # not yet
        call_command("move_artifacts", "--from", _spec_of(source), "--to", spec)
        for capture in captures:
            url = f"/api/captures/{capture.pk}/flamegraph/"
            assert owner_client.get(url).json()["value"] == 100
            folded = owner_client.get(f"/captures/{capture.pk}/download/folded/")
            assert b"".join(folded.streaming_content).decode() == RAW
    assert not Artifact.objects.exists()  # moved on from the database, nothing left behind
    assert len([p for p in media.rglob("*") if p.is_file()]) == 10


def _spec_of(storage: dict) -> str:
    backend = storage["BACKEND"]
    if backend.endswith("FileSystemStorage"):
        return "filesystem"
    if backend.endswith("DatabaseStorage"):
        return "database"
    options = storage["OPTIONS"]
    return f"s3://{options['bucket_name']}/{options['location']}"


def test_move_artifacts_refuses_an_unknown_backend_with_one_line():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="use filesystem, database or s3://bucket/prefix"):
        call_command("move_artifacts", "--from", "filesystem", "--to", "ftp://x")


def test_the_admin_shows_a_capture_whose_files_have_no_url(backend, admin_client):
    capture = _import()
    response = admin_client.get(f"/admin/profiles/capture/{capture.pk}/change/")
    assert response.status_code == 200
    assert capture.flamegraph_file.name in response.content.decode()


# --- moves that are interrupted, resumed, and never delete the only good copy ---------


class Interrupted(Exception):
    """The move's process died here (a kill, a dropped mount, a full disk)."""


class _CutOff(io.RawIOBase):
    """A source file that gives `limit` bytes, then fails: a copy cut off mid-file."""

    def __init__(self, data: bytes, limit: int) -> None:
        self.data, self.limit, self.pos = data, limit, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: len(self.data)}[whence]
        self.pos = base + offset
        return self.pos

    def read(self, size: int = -1) -> bytes:
        if self.pos >= self.limit:
            raise Interrupted(f"cut off after {self.pos} of {len(self.data)} bytes")
        end = self.limit if size is None or size < 0 else min(self.limit, self.pos + size)
        block, self.pos = self.data[self.pos : end], end
        return block


def _interrupt_save(storage, at_file: int, seen: dict) -> None:
    """Make `storage.save` die halfway through the `at_file`-th file it is given."""
    original = storage.save

    def save(name, content, max_length=None):
        seen["saves"] = seen.get("saves", 0) + 1
        if seen["saves"] == at_file:
            data = content.read()
            seen.update(name=name, size=len(data), written=len(data) // 2)
            content = File(_CutOff(data, len(data) // 2), name=name)
        return original(name, content, max_length=max_length)

    storage.save = save


MOVES = [("database", "filesystem"), ("filesystem", "database"), ("filesystem", "s3")]


@pytest.mark.parametrize(("source_kind", "destination_kind"), MOVES)
def test_a_move_interrupted_mid_file_resumes_and_never_deletes_the_only_good_copy(
    request, settings, tmp_path, owner_client, source_kind, destination_kind, capsys
):
    def spec(kind):
        return request.getfixturevalue("s3") if kind == "s3" else kind

    settings.MEDIA_ROOT = media = tmp_path / "media"
    source_spec, destination_spec = spec(source_kind), spec(destination_kind)
    settings.STORAGES = {**settings.STORAGES, "artifacts": _backend(source_spec, media)}
    captures = [_import(), _import()]
    names = [n for c in captures for n in _names(c)]
    source, destination = storage_for(source_spec), storage_for(destination_spec)
    want = {n: file_digest(source, n) for n in names}

    seen: dict = {}
    _interrupt_save(destination, at_file=3, seen=seen)
    with pytest.raises(Interrupted):
        artifacts_move(source=source, destination=destination)
    cut = seen["name"]
    assert source.exists(cut) and file_digest(source, cut) == want[cut]  # kept whole
    for name in names:  # every file is whole somewhere
        assert source.exists(name) or file_digest(destination, name) == want[name], name
    if not destination.exists(cut):
        # This store wrote nothing of the cut file (a transaction, a single PUT); a store
        # without atomic writes (a filesystem, NFS) keeps the half it got, as here:
        destination.save(cut, ContentFile(source.open(cut).read()[: seen["written"]]))
    assert destination.size(cut) < want[cut][0]

    call_command("move_artifacts", "--from", source_spec, "--to", destination_spec)
    report = capsys.readouterr().out
    assert "2 already there" in report and "1 copied again" in report, report
    assert f"{len(names) - 3} moved" in report, report
    assert all(file_digest(destination, n) == want[n] for n in names)
    assert not any(source.exists(n) for n in names)
    settings.STORAGES = {**settings.STORAGES, "artifacts": _backend(destination_spec, media)}
    for capture in captures:
        folded = owner_client.get(f"/captures/{capture.pk}/download/folded/")
        assert b"".join(folded.streaming_content).decode() == RAW
    print(
        f"\n{source_kind} -> {destination_kind}: interrupted in file 3 of {len(names)} "
        f"({cut.rsplit('/', 1)[-1]}, {seen['written']} of {seen['size']} bytes); "
        f"re-run: {report.strip()}"
    )


class _HalfWritingStorage(FileSystemStorage):
    """A destination that silently keeps half of what it is given (a failing disk)."""

    def _save(self, name, content):
        data = content.read()
        return super()._save(name, ContentFile(data[: len(data) // 2]))


def test_a_copy_that_reads_back_different_keeps_its_source_and_says_so(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.STORAGES = {**settings.STORAGES, "artifacts": _backend("database", tmp_path)}
    capture = _import()
    source = storage_for("database")
    with pytest.raises(MoveFailed, match="the source is kept"):
        artifacts_move(source=source, destination=_HalfWritingStorage(location=tmp_path / "d"))
    assert all(source.exists(n) for n in _names(capture))


# --- preflight against the real server -------------------------------------------------


def test_preflight_passes_on_a_real_s3_bucket_it_can_write(s3_server, tmp_path):
    result = _manage(
        ["preflight"], tmp_path, FLAMEDECK_ARTIFACTS=s3_server.new_spec(), **s3_server.environment()
    )
    assert result.returncode == 0, result.stderr
    leftovers = s3_server.client().list_objects_v2(Bucket=s3_server.bucket, Prefix="test-")
    assert not [o["Key"] for o in leftovers.get("Contents", []) if "/preflight/" in o["Key"]]


def test_preflight_names_a_key_the_s3_server_refuses_in_one_line(s3_server, tmp_path):
    env = s3_server.environment(secret_key="not-the-secret")
    result = _manage(["preflight"], tmp_path, FLAMEDECK_ARTIFACTS=s3_server.new_spec(), **env)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "the S3 server refused the access key" in result.stderr
    assert "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in result.stderr


def test_preflight_names_a_bucket_that_does_not_exist_in_one_line(s3_server, tmp_path):
    spec = "s3://no-such-bucket-here/flamedeck"
    result = _manage(["preflight"], tmp_path, FLAMEDECK_ARTIFACTS=spec, **s3_server.environment())
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert f"FLAMEDECK_ARTIFACTS={spec}: bucket 'no-such-bucket-here' does not exist" in (
        result.stderr
    )
