"""Uploaded files become gzip temp files, their inflated size bounded as they stream.

A gzip upload is kept as it is (not compressed again); a plain one is compressed
here. Either way its *inflated* size is counted block by block, with at most one
block (CHUNK) inflated in memory at a time, and the upload is refused with
UploadTooLarge the moment it passes the limit (FLAMEDECK_MAX_UPLOAD_MB): a 25 MB
gzip that would inflate to 16 GiB costs the web process one limit's worth of
inflating (about a second at 512 MB), never the whole bomb.
"""

import gzip
import tempfile
import zlib
from typing import IO, NamedTuple

GZIP_MAGIC = b"\x1f\x8b"
CHUNK = 1024 * 1024
HEAD = 4096
_GZIP_WBITS = 16 + zlib.MAX_WBITS


class UploadTooLarge(Exception):
    """An upload whose inflated size passed the limit; `str()` names the limit."""


class PreparedUpload(NamedTuple):
    """An upload as a gzip temp file (at offset 0), ready to store."""

    file: IO[bytes]
    head: bytes
    """The first inflated bytes (HEAD at most), to tell the format."""
    size: int
    """Inflated bytes (those read before a corrupt part, for a broken gzip)."""


def too_large_message(label: str, limit_mb: int) -> str:
    return (
        f"Upload too large: {label} inflates to more than the {limit_mb} MB limit "
        "(FLAMEDECK_MAX_UPLOAD_MB); it was refused as soon as it passed it."
    )


class _Meter:
    """Counts inflated bytes against the limit and keeps the head."""

    def __init__(self, limit_bytes: int, label: str) -> None:
        self.limit_bytes, self.label = limit_bytes, label
        self.size, self.head = 0, b""

    def count(self, block: bytes) -> None:
        if not self.head:
            self.head = block[:HEAD]
        self.size += len(block)
        if self.size > self.limit_bytes:
            raise UploadTooLarge(too_large_message(self.label, self.limit_bytes // 2**20))


class _Inflater:
    """Inflates a gzip stream (every member) fed in pieces, CHUNK at a time."""

    def __init__(self, meter: _Meter) -> None:
        self.meter = meter
        self.inflate = zlib.decompressobj(_GZIP_WBITS)
        self.broken = False

    def feed(self, data: bytes) -> None:
        while data and not self.broken:
            if self.inflate.eof:  # the next member of a multi-member gzip
                self.inflate = zlib.decompressobj(_GZIP_WBITS)
            try:
                block = self.inflate.decompress(data, CHUNK)
            except zlib.error:
                # Corrupt or trailing garbage: kept as it is; the parser stops at the
                # same place and names the problem.
                self.broken = True
                return
            self.meter.count(block)
            data = self.inflate.unused_data if self.inflate.eof else self.inflate.unconsumed_tail


def upload_prepare(source: IO[bytes], *, limit_bytes: int, label: str) -> PreparedUpload:
    """Stream `source` into a gzip temp file; UploadTooLarge once it inflates past
    `limit_bytes`."""
    meter = _Meter(limit_bytes, label)
    out = tempfile.TemporaryFile()  # noqa: SIM115 — handed to the caller, who closes it
    try:
        first = source.read(CHUNK)
        if first[:2] == GZIP_MAGIC:
            _copy_gzip(first, source, out, meter)
        else:
            _compress(first, source, out, meter)
    except BaseException:
        out.close()
        raise
    out.seek(0)
    return PreparedUpload(out, meter.head, meter.size)


def _copy_gzip(first: bytes, source: IO[bytes], out: IO[bytes], meter: _Meter) -> None:
    inflater = _Inflater(meter)
    block = first
    while block:
        out.write(block)
        inflater.feed(block)
        block = source.read(CHUNK)


def _compress(first: bytes, source: IO[bytes], out: IO[bytes], meter: _Meter) -> None:
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=6) as packed:
        block = first
        while block:
            meter.count(block)
            packed.write(block)
            block = source.read(CHUNK)
