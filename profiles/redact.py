"""What a viewer may not see of the flamedeck server's own processes.

A host with transport `local` is the flamedeck server itself: the command lines of its
processes (py-spy dump's `Process PID: CMD` line, `--subprocesses` frames
`process N:"cmd"`) and `dump --locals` values (arguments, tokens, paths) are shown to
host administrators only, as the host check already does (`runs.permissions.redact_check`).
Everyone else gets them replaced by `HIDDEN`, on the page, in the JSON API and in
downloads; every other frame, count and thread stays as it was.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from runs.permissions import HIDDEN_COMMAND, can_administer_hosts

from .models import Capture
from .pyspy.raw import PROCESS_OPEN, folded_record

HIDDEN = HIDDEN_COMMAND
_PROCESS_FRAME = re.compile(r'(process \d+:)".*"\Z', re.S)
_DUMP_PROCESS = re.compile(r"(\s*Process \d+:).*")
_MAX_HELD = 64  # as the raw parser: a command line spans at most this many lines


def hides_server_details(capture: Capture, user) -> bool:
    """Whether `user` must not see command lines and locals of this capture."""
    return bool(capture.host_id and capture.host.is_local and not can_administer_hosts(user))


def process_frame(name: str) -> str:
    """`process 10:"python train.py"` -> `process 10:"(hidden: …)"`; others unchanged."""
    match = _PROCESS_FRAME.match(name)
    return f'{match.group(1)}"{HIDDEN}"' if match else name


def tree(root: dict[str, Any] | None) -> dict[str, Any] | None:
    """A flamegraph or sandwich tree with its process frames renamed (in place)."""
    stack = [root] if root else []
    while stack:
        node = stack.pop()
        if isinstance(node.get("name"), str):
            node["name"] = process_frame(node["name"])
        stack.extend(node.get("children") or [])
    return root


def stats(data: dict[str, Any] | None) -> dict[str, Any] | None:
    """Stored stats as a viewer may see them: process frames renamed wherever a frame
    name appears, dump locals' values hidden. A copy; the stored stats stay whole."""
    if not data:
        return data

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            out = {k: walk(v) for k, v in value.items()}
            if "value" in out and "arg" in out and "name" in out:  # a dump local
                out["value"] = HIDDEN
            return out
        if isinstance(value, list):
            return [walk(v) for v in value]
        return process_frame(value) if isinstance(value, str) else value

    return walk(data)


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
    """`py-spy dump` text with the `Process PID: CMD` line's command and every
    `--locals` value (lines indented 8+ spaces, past `Arguments:`/`Locals:`) hidden."""
    for line in _lines(chunks):
        stripped = line.strip()
        if (match := _DUMP_PROCESS.match(line)) is not None:
            line = f"{match.group(1)} {HIDDEN}"
        elif line.startswith(" " * 8) and stripped not in ("Arguments:", "Locals:"):
            name, sep, _ = stripped.partition(": ")
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
        yield (line + "\n").encode()


def _folded_record(text: str) -> str | None:
    """The record with its process frames hidden, cut as the raw parser cuts it."""
    record = folded_record(text.rstrip("\r"))
    if record is None:
        return None
    frames, count = record
    return ";".join(process_frame(frame) for frame in frames) + f" {count}"
