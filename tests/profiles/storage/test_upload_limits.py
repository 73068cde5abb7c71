"""Compressed uploads are refused (413 naming the limit) as soon as what they inflate
to passes FLAMEDECK_MAX_UPLOAD_MB, inflating a block at a time; logs too."""

import gzip
import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from profiles.models import Capture
from profiles.storage import files as capture_files
from profiles.storage import uploads

pytestmark = pytest.mark.django_db

MIB = 1024 * 1024
LINES = b"thread (1): MainThread;train (train.py:10);step (train.py:20) 1\n" * 16_384  # 1 MiB


def bomb(inflated_mib: int, block: bytes = LINES) -> bytes:
    """A multi-member gzip: one compressed MiB repeated, as cheap to make as to send."""
    member = gzip.compress(block[:MIB], compresslevel=9)
    return member * inflated_mib


class CountingReader(io.BytesIO):
    """How far the upload was read."""

    def read(self, size=-1):
        data = super().read(size)
        self.read_bytes = self.tell()
        return data


def test_a_16_gib_bomb_is_refused_after_inflating_one_limits_worth():
    member = gzip.compress(b"\0" * MIB, compresslevel=9)
    source = CountingReader(member * 16_384)  # 16 GiB inflated, ~17 MB sent
    with pytest.raises(uploads.UploadTooLarge, match="512 MB limit .FLAMEDECK_MAX_UPLOAD_MB"):
        uploads.upload_prepare(source, limit_bytes=512 * MIB, label="bomb.gz")
    # One block of the upload (a thousand members) already inflates past the limit.
    assert source.read_bytes <= uploads.CHUNK < len(source.getvalue()) / 16


def test_a_gzip_of_one_huge_line_and_one_of_semicolons_count_what_they_inflate_to():
    for block in (b"x" * MIB, b";" * MIB):
        with pytest.raises(uploads.UploadTooLarge):
            uploads.upload_prepare(io.BytesIO(bomb(9, block)), limit_bytes=8 * MIB, label="f")


def test_a_multi_member_gzip_under_the_limit_is_kept_whole_with_its_inflated_size():
    prepared = uploads.upload_prepare(io.BytesIO(bomb(3)), limit_bytes=8 * MIB, label="f")
    with prepared.file as fh:
        assert gzip.decompress(fh.read()) == LINES * 3
    assert prepared.size == 3 * MIB and prepared.head == LINES[:4096]


def test_a_plain_upload_over_the_limit_is_refused_too():
    with pytest.raises(uploads.UploadTooLarge):
        uploads.upload_prepare(io.BytesIO(LINES * 3), limit_bytes=2 * MIB, label="f")


def test_a_corrupt_gzip_is_kept_for_the_parser_to_name_the_problem():
    broken = gzip.compress(LINES)[:5000] + b"\xff" * 100
    prepared = uploads.upload_prepare(io.BytesIO(broken), limit_bytes=MIB, label="f")
    with prepared.file as fh:
        assert fh.read() == broken


@pytest.mark.parametrize("field", ["file", "log"])
def test_the_api_and_the_page_answer_413_naming_the_limit_and_store_nothing(
    owner_client, settings, field
):
    settings.FLAMEDECK_MAX_UPLOAD_MB = 2
    for url in ("/api/captures/import/", "/captures/import/"):
        files = {"file": SimpleUploadedFile("ok.txt", LINES[:1000])}
        files[field] = SimpleUploadedFile("bomb.gz", bomb(3))
        response = owner_client.post(url, files)
        assert response.status_code == 413, (url, response.content[:300])
        text = response.content.decode()
        assert "2 MB limit (FLAMEDECK_MAX_UPLOAD_MB)" in text and "bomb.gz" in text
    assert not Capture.objects.exists()


def test_read_log_reads_a_bounded_prefix_of_a_huge_log(owner_client, settings, monkeypatch):
    monkeypatch.setattr(capture_files, "LOG_READ_BYTES", 64 * 1024)
    log = b"py-spy> Sampling process 100 times a second for 30 seconds.\n" + b"x" * (3 * MIB)
    files = {"file": SimpleUploadedFile("ok.txt", LINES[:1000]), "log": io.BytesIO(log)}
    capture = Capture.objects.get(pk=owner_client.post("/api/captures/import/", files).json()["id"])
    text = capture_files.read_log(capture)
    assert len(text) == 64 * 1024 and text.startswith("py-spy> Sampling process 100")
