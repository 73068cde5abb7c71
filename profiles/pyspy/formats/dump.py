"""`py-spy dump` output, as text (with or without --native/--locals) or --json.

Text layout: `Process PID: CMD`, `Python vX (PATH)`, then per thread a header
`Thread TID (idle|active|active+gil): "NAME"` (status and name optional, `(gil)`
without --nonblocking details) and frames innermost first, indented four spaces:
`name (file:line)` or `name (library)`; with --locals, `Arguments:`/`Locals:`
blocks of `name: repr` lines indented further. ANSI colour codes are removed.

Frames are named as py-spy names them by default, as records are (frames.short_names
over the dump's frames): `--json`'s `short_filename` where it gave one, else its full
`filename` shortened, and text printed with `--full-filenames` alike. Where the dump
gave a longer file than the name shows, a frame keeps it as `path`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..core.frames import is_native, renamed, split_location
from ..core.types import DumpFrame, DumpLocal, DumpThread
from ..errors import ProfileError

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
PROCESS_LINE = re.compile(r"(\s*Process (\d+):)")
PYTHON_LINE = re.compile(r"\s*Python v\d+\.\d+\S* \(.*\)\s*\Z")
THREAD_LINE = re.compile(r'Thread (\d+|0[xX][0-9a-fA-F]+)(?: \(([a-z+]+)\))?(?:: "(.*)")?\s*\Z')
_LOCAL = re.compile(r"\s{8,}(\S[^:]*): (.*)\Z")


def parse_dump(text: str) -> list[DumpThread]:
    """Per-thread stacks from `py-spy dump` text or `--json`; raises ProfileError."""
    body = text.removeprefix("\ufeff").lstrip()
    if body.startswith("["):
        return _from_json(body)
    threads: list[DumpThread] = []
    pid: int | None = None
    section, in_command = "Arguments:", False
    for line in _ANSI.sub("", text).replace("\r", "").split("\n"):
        if (m := PROCESS_LINE.match(line)) is not None:
            pid, in_command = int(m.group(2)), True
            continue
        header = THREAD_LINE.match(line)
        if in_command and header is None and not PYTHON_LINE.match(line):
            continue  # the rest of a command line that held newlines (`python -c`)
        in_command = False
        if header is not None:
            tid, status, name = header.groups()
            threads.append(_thread(pid, tid, status or "", name or ""))
        elif threads and line.startswith("        ") and line.strip():
            section = _local_line(threads[-1], line, section)
        elif threads and line.startswith("    ") and line.strip():
            threads[-1]["frames"].append(_frame(line.strip()))
    if not threads:
        raise ProfileError("input is not `py-spy dump` output: no `Thread ...` lines")
    return _named(threads)


def _named(threads: list[DumpThread]) -> list[DumpThread]:
    """The threads with each frame's file as py-spy names it by default (module doc),
    the full file kept as `path` where it changes; the list is changed in place."""
    frames = [f for t in threads for f in t["frames"] if f["location"]]
    names = renamed(f"{f['name']} ({f['location']})" for f in frames)
    for frame in frames:
        short = names.get(f"{frame['name']} ({frame['location']})")
        if short is not None:
            location = split_location(short)[1]
            full = frame["location"]
            frame["path"] = frame.get("path") or _file(full, location)
            frame["location"] = location
    return threads


def _file(location: str, short: str) -> str:
    """The file of a location (`/a/b.py:12` -> `/a/b.py`) when its short one has a line."""
    file, _, line = location.rpartition(":")
    return file if short.endswith(f":{line}") and line.isdigit() else location


def _thread(pid: int | None, tid_text: str, status: str, name: str) -> DumpThread:
    tid: int | str = int(tid_text) if tid_text.isdigit() else tid_text
    known = status in ("idle", "active", "active+gil")
    return {
        "pid": pid,
        "tid": tid,
        "name": name,
        "status": status,
        "active": status.startswith("active") if known else None,
        "idle": status == "idle" if known else None,
        "gil": status.endswith("gil") if status else None,
        "frames": [],
    }


def _frame(text: str) -> DumpFrame:
    name, location = split_location(text)
    return {"name": name, "location": location, "native": is_native(text)}


def _local_line(thread: DumpThread, line: str, section: str) -> str:
    stripped = line.strip()
    if stripped in ("Arguments:", "Locals:"):
        return stripped
    match = _LOCAL.match(line)
    if match is None or not thread["frames"]:
        return section
    local: DumpLocal = {
        "name": match.group(1),
        "value": match.group(2),
        "arg": section == "Arguments:",
    }
    thread["frames"][-1].setdefault("locals", []).append(local)
    return section


def _from_json(body: str) -> list[DumpThread]:
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise ProfileError(
            f"input looks like `py-spy dump --json` but is not valid JSON ({exc})"
        ) from None
    if not isinstance(doc, list) or not all(isinstance(t, dict) for t in doc):
        raise ProfileError(
            "input is JSON but not `py-spy dump --json` output (expected a list of threads)"
        )
    return _named([_json_thread(t) for t in doc])


def _json_thread(item: dict[str, Any]) -> DumpThread:
    active, gil = item.get("active"), item.get("owns_gil")
    tid = item.get("os_thread_id") or item.get("thread_id") or 0
    status = "idle" if active is False else ("active+gil" if gil else "active") if active else ""
    return {
        "pid": item.get("pid") if isinstance(item.get("pid"), int) else None,
        "tid": tid if isinstance(tid, int) else str(tid),
        "name": str(item.get("thread_name") or ""),
        "status": status,
        "active": active if isinstance(active, bool) else None,
        "idle": (not active) if isinstance(active, bool) else None,
        "gil": gil if isinstance(gil, bool) else None,
        "frames": [_json_frame(f) for f in item.get("frames") or [] if isinstance(f, dict)],
    }


def _json_frame(item: dict[str, Any]) -> DumpFrame:
    full = str(item.get("filename") or "")
    file = str(item.get("short_filename") or full)
    line = item.get("line")
    location = f"{file}:{line}" if isinstance(line, int) and line > 0 else file
    name = str(item.get("name", "?"))
    frame: DumpFrame = {
        "name": name,
        "location": location,
        "native": is_native(f"{name} ({location})"),
    }
    if full and full != file:
        frame["path"] = full
    if isinstance(item.get("locals"), list):
        frame["locals"] = [
            {"name": str(v.get("name")), "value": str(v.get("repr")), "arg": bool(v.get("arg"))}
            for v in item["locals"]
            if isinstance(v, dict)
        ]
    return frame


def parse_dump_series(text: str) -> list[tuple[float | None, list[DumpThread]]] | None:
    """A whole-job dump's successive dumps of one process, as flamedeck stores them:
    a JSON list of {"at": host epoch seconds or null, "dump": `py-spy dump --json`
    output}, oldest first. None when `text` is anything else (one dump, text);
    raises ProfileError when an item's dump is not `py-spy dump --json` output."""
    body = text.removeprefix("\ufeff").lstrip()
    if not body.startswith("["):
        return None
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not doc or not all(isinstance(item, dict) and "dump" in item for item in doc):
        return None
    series = []
    for item in doc:
        at, threads = item.get("at"), item["dump"]
        if not isinstance(threads, list) or not all(isinstance(t, dict) for t in threads):
            raise ProfileError("a stored dump is not `py-spy dump --json` output")
        when = float(at) if isinstance(at, int | float) and not isinstance(at, bool) else None
        series.append((when, _named([_json_thread(t) for t in threads])))
    return series
