"""Command lines and dump locals, hidden: the one redaction every output passes through.

py-spy writes the command lines of the processes it samples into its output: a
`--subprocesses` record's frames `process N:"CMDLINE"`, a dump's first line
`Process N: CMDLINE` (a `python -c` script continues on the lines below it, up to
`Python vX.Y.Z (PATH)`), and `dump --locals` adds every frame's variables. A command
line may hold `;`, `"` and newlines. `hide_text`, `hide` (any JSON-ready value), and
the streaming `folded_text` / `dump_text` replace each with HIDDEN and leave every
other frame, count and thread as it was. Who gets the hidden form is the caller's
decision (profiles.redact).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from .dump import PROCESS_LINE, PYTHON_LINE, THREAD_LINE
from .raw import PROCESS_OPEN, folded_record

HIDDEN = "(hidden: a process of the flamedeck server; host admins see it)"
# Fields that hold a whole command line (the host check's process list).
COMMAND_KEYS = frozenset({"command", "cmdline", "args"})
_PROCESS_IN_TEXT = re.compile(r'process \d+:"')
_MAX_HELD = 64  # as the raw parser: a command line spans at most this many lines


def hide_text(text: str) -> str:
    """Every process frame's command line in `text` hidden, wherever it sits: from its
    opening quote to the last quote of the text (past any `"` inside the command
    line), or to the end when no quote closes it. Over-hiding is the safe side."""
    match = _PROCESS_IN_TEXT.search(text)
    if match is None:
        return text
    opened = match.end() - 1
    closed = text.rfind('"')
    end = closed + 1 if closed > opened else len(text)
    return f'{text[:opened]}"{HIDDEN}"{hide_text(text[end:])}'


def _is_dump_local(value: dict) -> bool:
    return "value" in value and "arg" in value and "name" in value


def hide(value: Any) -> Any:
    """A copy of a JSON-ready value (stats, a tree, a table, an API body) with every
    string's process frames hidden, dump locals' values hidden, and the values of
    COMMAND_KEYS hidden. Iterative, so a deep flamegraph cannot exhaust the stack."""
    root = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        parent, key = stack.pop()
        item = parent[key]
        if isinstance(item, str):
            parent[key] = hide_text(item)
        elif isinstance(item, dict):
            copy = {hide_text(k) if isinstance(k, str) else k: v for k, v in item.items()}
            if _is_dump_local(copy):
                copy["value"] = HIDDEN
            for name, field in copy.items():
                if name in COMMAND_KEYS and isinstance(field, str):
                    copy[name] = HIDDEN
                elif isinstance(field, str | dict | list | tuple):
                    stack.append((copy, name))
            parent[key] = copy
        elif isinstance(item, list | tuple):
            copy = list(item)
            stack.extend((copy, i) for i in range(len(copy)))
            parent[key] = copy
    return root[0]


# --- downloads (streamed line by line, never parsed as a whole) ------------------------


def _lines(chunks: Iterable[bytes]) -> Iterator[str]:
    rest = b""
    for chunk in chunks:
        rest += chunk
        *whole, rest = rest.split(b"\n")
        for line in whole:
            yield line.decode("utf-8", "replace")
    if rest:
        yield rest.decode("utf-8", "replace")


def dump_text(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """`py-spy dump` text with each `Process PID: CMD` command hidden, lines and all
    (up to the `Python vX (PATH)` line or a thread header), and every `--locals`
    value (lines indented 8+ spaces, past `Arguments:`/`Locals:`) hidden."""
    in_command = False
    for line in _lines(chunks):
        if (match := PROCESS_LINE.match(line)) is not None:
            in_command = True
            line = f"{match.group(1)} {HIDDEN}"
        elif in_command and (PYTHON_LINE.match(line) or THREAD_LINE.match(line)):
            in_command = False
        elif in_command:
            continue
        elif line.startswith(" " * 8) and line.strip() not in ("Arguments:", "Locals:"):
            name, sep, _ = line.strip().partition(": ")
            line = f"{line[: len(line) - len(line.lstrip())]}{name}: {HIDDEN}" if sep else ""
        yield (line + "\n").encode()


def folded_text(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Collapsed stacks with each `process N:"cmd"` frame's command hidden. A command
    line may hold `;` and newlines: records are cut as the raw parser cuts them, and a
    record that never closes (which the parser skips) is left out."""
    held: list[str] = []
    for line in _lines(chunks):
        if held or PROCESS_OPEN.match(line):
            held.append(line)
            record = _folded_record("\n".join(held))
            if record is not None:
                held = []
                yield (record + "\n").encode()
            elif len(held) >= _MAX_HELD:
                held = []
            continue
        yield (hide_text(line) + "\n").encode()


def _folded_record(text: str) -> str | None:
    """The record with its process frames hidden, cut as the raw parser cuts it."""
    record = folded_record(text.rstrip("\r"))
    if record is None:
        return None
    frames, count = record
    return ";".join(hide_text(frame) for frame in frames) + f" {count}"
