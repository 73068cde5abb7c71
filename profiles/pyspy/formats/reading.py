"""Open what the dashboard stores (maybe gzip, maybe UTF-16) and pick the parser.

Detection looks at the first 64 KiB: a UTF-16 BOM decodes the file as UTF-16 (as it
streams, like everything else); JSON (`{`/`[`) must be a speedscope document; SVG,
`py-spy dump` text and py-spy's own log are recognised and refused with a reason; anything else is
read as raw collapsed stacks, line by line, with invalid UTF-8 replaced by U+FFFD.
One rule for NUL: a NUL byte anywhere (not only in the first 64 KiB) refuses the
file as binary; raw input is checked line by line as it streams. A total beyond
2^53 samples is refused as implausible (raw and speedscope alike). A line is read
MAX_LINE_CHARS + 1 bytes at most; the rest of a longer one is dropped as it streams
and the line counts in `skipped_lines` (limits.py).
"""

from __future__ import annotations

import codecs
import itertools
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from ..core.profile import Profile
from ..errors import ProfileError
from ..limits import MAX_LINE_CHARS
from .json_stream import JsonError, JsonStream, text_pieces
from .raw import parse_raw_lines
from .speedscope import Speedscope, parse_speedscope, read_speedscope

_HEAD = 65536
PIECE = 1 << 18
"""JSON is decoded and parsed this many bytes (or characters) at a time."""
MAX_SAMPLES = 2**53
"""Totals beyond this are refused: no capture has them, and JSON numbers lose precision."""
_DUMP = re.compile(r"Process \d+: .*\n(?:.*\n)*?Thread (?:\d+|0[xX][0-9a-fA-F]+)")


def read_profile(path: str | Path) -> Profile:
    """Read a py-spy raw or speedscope file (plain or gzip) into a Profile."""
    label = Path(path).name
    try:
        with open(path, "rb") as fh:
            if fh.read(2) != b"\x1f\x8b":
                fh.seek(0)
                return _parse_stream(fh, label)
    except OSError as exc:
        raise ProfileError(f"{label}: cannot read it ({exc.strerror})") from None
    return _read_gzip(path, label)


def _read_gzip(path: str | Path, label: str) -> Profile:
    import gzip  # only here: it costs the plain-text CLI run a few ms of imports
    import zlib

    try:
        with gzip.open(path, "rb") as gz:
            return _parse_stream(gz, label)
    except (EOFError, OSError, zlib.error) as exc:
        if isinstance(exc, OSError) and exc.errno is not None:
            raise ProfileError(f"{label}: cannot read it ({exc.strerror})") from None
        raise ProfileError(f"{label} is gzip data that is truncated or corrupt ({exc})") from None


def parse_profile_text(text: str, label: str = "input") -> Profile:
    """Parse already-decoded text (raw or speedscope JSON) into a Profile."""
    text = text.removeprefix("\ufeff")
    if "\x00" in text:
        raise ProfileError(_binary(label, f"a NUL character at offset {text.index(chr(0))}"))
    _refuse_other_kinds(text[:_HEAD], label)
    if text.lstrip()[:1] in ("{", "["):
        return _parse_json(text_pieces(text, PIECE), label)
    return _checked(parse_raw_lines(text.split("\n")), label, bool(text.strip()))


def _parse_stream(fh: IO[bytes], label: str) -> Profile:
    head = fh.read(_HEAD)
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        fh.seek(0)
        return _parse_utf16(fh, label)
    if b"\x00" in head:
        raise ProfileError(_binary(label, f"a NUL byte at offset {head.index(0)}"))
    head_text = head.decode("utf-8", "replace").removeprefix("\ufeff")
    _refuse_other_kinds(head_text, label)
    fh.seek(0)
    if head_text.lstrip()[:1] in ("{", "["):
        return _parse_json_bytes(fh, label)
    return _parse_lines(_ByteLines(fh, label))


def _parse_lines(lines: _ByteLines | _TextLines) -> Profile:
    profile = parse_raw_lines(lines)
    profile.skipped_lines += lines.too_long
    return _checked(profile, lines.label, profile.node_count > 1 or profile.skipped_lines > 0)


def _parse_utf16(fh: IO[bytes], label: str) -> Profile:
    pieces = _utf16_pieces(fh, label)
    head = next(pieces, "")
    _refuse_other_kinds(head, label)
    text = itertools.chain([head], pieces)
    if head.lstrip()[:1] in ("{", "["):
        return _parse_json(text, label)
    return _parse_lines(_TextLines(text, label))


def _binary(label: str, where: str) -> str:
    return f"{label} is binary data (or UTF-16 without a BOM), not py-spy output: {where}"


class _ByteLines:
    """Decoded lines of at most MAX_LINE_CHARS bytes; a longer line is dropped as it
    streams and counted in `too_long`. A NUL byte anywhere refuses the file."""

    def __init__(self, fh: IO[bytes], label: str) -> None:
        self.fh, self.label, self.too_long = fh, label, 0

    def __iter__(self) -> Iterator[str]:
        readline, number = self.fh.readline, 0
        while line := readline(MAX_LINE_CHARS + 1):
            number += 1
            if b"\x00" in line:
                raise ProfileError(_binary(self.label, f"a NUL byte on line {number}"))
            if len(line) > MAX_LINE_CHARS and not line.endswith(b"\n"):
                self._drop_rest(number)
                continue
            text = line.decode("utf-8", "replace")
            yield text.removeprefix("\ufeff") if number == 1 else text

    def _drop_rest(self, number: int) -> None:
        self.too_long += 1
        while (rest := self.fh.readline(PIECE)) and not rest.endswith(b"\n"):
            if b"\x00" in rest:
                raise ProfileError(_binary(self.label, f"a NUL byte on line {number}"))


class _TextLines:
    """Lines of decoded text pieces, at most MAX_LINE_CHARS each; a longer one is
    dropped and counted in `too_long`."""

    def __init__(self, pieces: Iterable[str], label: str) -> None:
        self.pieces, self.label, self.too_long = pieces, label, 0

    def __iter__(self) -> Iterator[str]:
        partial, dropping = "", False
        for piece in self.pieces:
            *lines, rest = (partial + piece).split("\n")
            for line in lines:
                if dropping:
                    dropping = False
                else:
                    yield line
            partial = rest
            if len(partial) > MAX_LINE_CHARS:
                self.too_long += not dropping
                partial, dropping = "", True
        if partial and not dropping:
            yield partial


def _utf16_pieces(fh: IO[bytes], label: str) -> Iterator[str]:
    """UTF-16 text (the BOM picks the byte order), PIECE bytes at a time."""
    decoder = codecs.getincrementaldecoder("utf-16")("replace")
    offset = 0
    for block in itertools.chain(iter(lambda: fh.read(PIECE), b""), [None]):
        text = decoder.decode(b"", final=True) if block is None else decoder.decode(block)
        if "\x00" in text:
            where = f"a NUL character at offset {offset + text.index(chr(0))}"
            raise ProfileError(_binary(label, where))
        offset += len(text)
        yield text


def _parse_json_bytes(fh: IO[bytes], label: str) -> Profile:
    """Decoded and parsed piece by piece: the file is never held whole, as bytes,
    text or objects (see speedscope.py for what is kept)."""
    pieces = decoded_pieces(fh, label)
    try:
        return _parse_json(pieces, label)
    except ProfileError:
        for _ in pieces:  # a NUL byte further on is the reason that names the file
            pass
        raise


def decoded_pieces(fh: IO[bytes], label: str) -> Iterator[str]:
    """UTF-8 text (invalid bytes replaced, a BOM dropped); a NUL byte refuses the file."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    offset, first = 0, True
    while block := fh.read(PIECE):
        if (nul := block.find(0)) >= 0:
            raise ProfileError(_binary(label, f"a NUL byte at offset {offset + nul}"))
        offset += len(block)
        text = decoder.decode(block)
        if first and text:
            text, first = text.removeprefix("\ufeff"), False
        yield text
    yield decoder.decode(b"", final=True)


def _refuse_other_kinds(head: str, label: str) -> None:
    start = head.lstrip()[:200].lower()
    if start.startswith(("<?xml", "<svg", "<!doctype svg", "<html")):
        raise ProfileError(
            f"{label} is an SVG/HTML flamegraph, not py-spy samples; "
            "record with --format raw or --format speedscope"
        )
    if start.startswith("py-spy>") or "\npy-spy> " in head[:4096]:
        raise ProfileError(
            f"{label} is py-spy's log (its stdout), not its samples; pass it as --log"
        )
    if _DUMP.match(head.lstrip()):
        raise ProfileError(
            f"{label} is `py-spy dump` output (stacks at one instant), not a recording; "
            "read it with the `dump` command"
        )


def _parse_json(pieces: Iterable[str], label: str) -> Profile:
    stream = JsonStream(iter(pieces))
    try:
        doc = read_speedscope(stream) if stream.peek() == "{" else stream.value()
        stream.end()
    except JsonError as exc:
        raise ProfileError(f"{label} looks like JSON but is truncated or invalid ({exc})") from None
    except RecursionError:
        raise ProfileError(f"{label} is JSON nested too deeply to be a profile") from None
    if isinstance(doc, Speedscope) and doc.is_speedscope:
        return _checked(parse_speedscope(doc, label), label, True)
    if isinstance(doc, list) and doc and isinstance(doc[0], dict) and "thread_id" in doc[0]:
        raise ProfileError(
            f"{label} is `py-spy dump --json` output; read it with the `dump` command"
        )
    raise ProfileError(f"{label} is JSON but not a speedscope profile (no profiles/shared)")


def _checked(profile: Profile, label: str, had_content: bool) -> Profile:
    if not had_content:
        raise ProfileError(f"{label} is empty: py-spy wrote no samples")
    if profile.node_count == 1 and profile.skipped_lines:
        raise ProfileError(
            f"{label} is not py-spy raw output: none of its {profile.skipped_lines} lines "
            "is a `frame;frame COUNT` record"
        )
    total = sum(profile.self_count)
    if total > MAX_SAMPLES:
        raise ProfileError(
            f"{label} claims {total} samples, more than 2^53: implausible for py-spy "
            "(a day at 1000 Hz on 1000 threads is under 2^37); the counts are corrupt"
        )
    return profile


def read_text(path: str) -> str:
    """A whole small file as text (a log, a dump, a track's capture): gzip undone, a
    UTF-16 BOM honoured, invalid UTF-8 replaced; a clear ProfileError if unreadable."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ProfileError(f"{Path(path).name}: cannot read it ({exc.strerror})") from None
    if data[:2] == b"\x1f\x8b":
        import gzip
        import zlib

        try:
            data = gzip.decompress(data)
        except (EOFError, OSError, zlib.error) as exc:
            raise ProfileError(f"{Path(path).name} is truncated or corrupt gzip ({exc})") from None
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return data.decode("utf-16", "replace")
    return data.decode("utf-8", "replace")
