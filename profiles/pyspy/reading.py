"""Open what the dashboard stores (maybe gzip, maybe UTF-16) and pick the parser.

Detection looks at the first 64 KiB: a UTF-16 BOM decodes the whole file as
UTF-16; JSON (`{`/`[`) must be a speedscope document; SVG, `py-spy dump` text
and py-spy's own log are recognised and refused with a reason; anything else is
read as raw collapsed stacks, line by line, with invalid UTF-8 replaced by U+FFFD.
"""

from __future__ import annotations

import codecs
import gzip
import json
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from .errors import ProfileError
from .profile import Profile
from .raw import parse_raw_lines
from .speedscope import is_speedscope, parse_speedscope

_HEAD = 65536
_DUMP = re.compile(r"Process \d+: .*\n(?:.*\n)*?Thread (?:\d+|0[xX][0-9a-fA-F]+)")
_GZIP_ERRORS = (EOFError, OSError, zlib.error)


def read_profile(path: str | Path) -> Profile:
    """Read a py-spy raw or speedscope file (plain or gzip) into a Profile."""
    label = Path(path).name
    try:
        with open(path, "rb") as fh:
            gzipped = fh.read(2) == b"\x1f\x8b"
        if gzipped:
            with gzip.open(path, "rb") as gz:
                return _parse_stream(gz, label)
        with open(path, "rb") as fh:
            return _parse_stream(fh, label)
    except _GZIP_ERRORS as exc:
        if isinstance(exc, OSError) and exc.errno is not None:
            raise ProfileError(f"{label}: cannot read it ({exc.strerror})") from None
        raise ProfileError(f"{label} is gzip data that is truncated or corrupt ({exc})") from None


def parse_profile_text(text: str, label: str = "input") -> Profile:
    """Parse already-decoded text (raw or speedscope JSON) into a Profile."""
    text = text.removeprefix("\ufeff")
    _refuse_other_kinds(text[:_HEAD], label)
    if text.lstrip()[:1] in ("{", "["):
        return _parse_json(text, label)
    return _checked(parse_raw_lines(text.split("\n")), label, bool(text.strip()))


def _parse_stream(fh: IO[bytes], label: str) -> Profile:
    head = fh.read(_HEAD)
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return parse_profile_text((head + fh.read()).decode("utf-16", "replace"), label)
    if b"\x00" in head:
        raise ProfileError(f"{label} is binary data (or UTF-16 without a BOM), not py-spy output")
    head_text = head.decode("utf-8", "replace").removeprefix("\ufeff")
    _refuse_other_kinds(head_text, label)
    if head_text.lstrip()[:1] in ("{", "["):
        return _parse_json((head + fh.read()).decode("utf-8", "replace"), label)
    fh.seek(0)
    profile = parse_raw_lines(_decoded_lines(fh))
    return _checked(profile, label, bool(head.strip()))


def _decoded_lines(fh: IO[bytes]) -> Iterator[str]:
    first = True
    for line in fh:
        text = line.decode("utf-8", "replace")
        if first:
            text, first = text.removeprefix("\ufeff"), False
        yield text


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


def _parse_json(text: str, label: str) -> Profile:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ProfileError(f"{label} looks like JSON but is truncated or invalid ({exc})") from None
    except RecursionError:
        raise ProfileError(f"{label} is JSON nested too deeply to be a profile") from None
    if is_speedscope(doc):
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
    return profile
