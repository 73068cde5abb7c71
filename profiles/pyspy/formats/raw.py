"""py-spy `--format raw` (collapsed stacks): `root;...;leaf COUNT` per line.

Rules, in the order they are applied to each line (line ending `\\n`, `\\r\\n`):
- blank lines are ignored and not counted;
- `#` lines are comments: skipped and counted in `skipped_lines`;
- the count is the text after the last space and must be a plain non-negative
  integer of at most 18 digits; otherwise the line is skipped (fractional,
  negative or missing counts);
- a process frame `process N:"cmd"` whose command line held a newline spans
  several physical lines: a line that starts `process N:"` but lacks a count (or
  ends inside the quoted command line) is held, following lines are appended
  with `\\n` until the record has a count and closed quotes (at most 64 lines);
  if it never completes, every held line counts as skipped;
- a `;` inside a command line is glued back into its process frame;
- a line longer than MAX_LINE_CHARS, a frame longer than MAX_FRAME_CHARS or a stack
  deeper than MAX_STACK_DEPTH (limits.py) is skipped and counted in `skipped_lines`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..core.profile import Profile, ProfileBuilder
from ..limits import MAX_FRAME_CHARS, MAX_LINE_CHARS, MAX_STACK_DEPTH

_MAX_HELD = 64
PROCESS_OPEN = re.compile(r'process \d+:"')
# A stack this short can hold neither a frame nor a depth past the limits: the fast
# path takes it without looking at its frames.
_SHORT = min(MAX_FRAME_CHARS, MAX_STACK_DEPTH)


def parse_raw_lines(lines: Iterable[str]) -> Profile:
    """Parse raw lines (with or without line endings) into a Profile."""
    builder = ProfileBuilder()
    add = builder.add
    held: list[str] = []
    for line in lines:
        text = line.rstrip("\r\n")
        stack, _, num = text.rpartition(" ")
        if (
            not held
            and stack
            and num.isdigit()
            and num.isascii()
            and len(num) < 19
            and text[0] not in "#p"
            and len(stack) <= _SHORT
        ):
            add(stack.split(";"), int(num))
            continue
        held = _careful_line(builder, held, text)
    builder.skipped_lines += len(held)
    return builder.build("raw")


def _careful_line(builder: ProfileBuilder, held: list[str], text: str) -> list[str]:
    """Everything the fast path declined; returns the lines still held."""
    if len(text) > MAX_LINE_CHARS:
        builder.skipped_lines += len(held) + 1
        return []
    if held:
        joined = folded_record("\n".join([*held, text]))
        if joined is not None:
            _add_bounded(builder, joined, len(held) + 1)
            return []
        room = sum(map(len, held)) + len(text) <= MAX_LINE_CHARS
        if len(held) < _MAX_HELD and room and not _startsfolded_record(text):
            return [*held, text]
        builder.skipped_lines += len(held)
    if not text.strip():
        return []
    if text.startswith("#"):
        builder.skipped_lines += 1
        return []
    record = folded_record(text)
    if record is not None:
        _add_bounded(builder, record, 1)
        return []
    if PROCESS_OPEN.match(text):
        return [text]
    builder.skipped_lines += 1
    return []


def _add_bounded(builder: ProfileBuilder, record: tuple[list[str], int], lines: int) -> None:
    """Add a record within the limits; otherwise its `lines` count as skipped."""
    frames, count = record
    if len(frames) > MAX_STACK_DEPTH or max(map(len, frames)) > MAX_FRAME_CHARS:
        builder.skipped_lines += lines
    else:
        builder.add(frames, count)


def _startsfolded_record(text: str) -> bool:
    return text.startswith(("process ", "thread (")) and folded_record(text) is not None


def folded_record(text: str) -> tuple[list[str], int] | None:
    """One collapsed-stack record as (frames, count), process frames whose command held
    a `;` glued back; None when the text is not a whole record."""
    stack, _, num = text.rpartition(" ")
    if not stack or not (num.isdigit() and num.isascii() and len(num) < 19):
        return None
    frames = stack.split(";")
    if text.startswith("process "):
        frames = _glue_process_frames(frames)
        if frames is None:
            return None
    return frames, int(num)


def _glue_process_frames(frames: list[str]) -> list[str] | None:
    """Re-join process frames split by a `;` in the command line; None if unclosed."""
    out: list[str] = []
    i = 0
    while i < len(frames) and frames[i].startswith("process "):
        merged = frames[i]
        i += 1
        while not _closed(merged) and i < len(frames):
            merged += ";" + frames[i]
            i += 1
        if not _closed(merged):
            return None
        out.append(merged)
    out.extend(frames[i:])
    return out


def _closed(frame: str) -> bool:
    return not PROCESS_OPEN.match(frame) or (
        frame.endswith('"') and len(frame) > frame.index('"') + 1
    )
