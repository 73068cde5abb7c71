"""Artifact backends (FLAMEDECK_ARTIFACTS): every read and write of capture files goes
through the configured storage; prune_raw works on each; move_artifacts moves them."""

import gzip

import boto3
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from moto import mock_aws

from profiles import services
from profiles.artifacts import ARTIFACT_FIELDS, artifact_storage
from profiles.models import Artifact, Capture

pytestmark = pytest.mark.django_db

RAW = (
    "thread (11): MainThread;train (train.py:10);cuStreamSynchronize (libcuda.so.1) 60\n"
    "thread (12): loader;load (data.py:5);cudaMemcpy (libcudart.so) 40\n"
)
BUCKET = "flamedeck-test"


def _backend(spec: str, media_root) -> dict:
    from config.env import artifacts_storage

    return artifacts_storage(spec, str(media_root))


@pytest.fixture
def s3(monkeypatch):
    """moto's in-process S3 (no server, no network), with one bucket."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=BUCKET)
        yield f"s3://{BUCKET}/captures-prefix"


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
