"""What a py-spy frame string says: synthetic process/thread frame, Python or native.

py-spy writes frames as `name (location)`: `forward (torch/nn/linear.py:134)`,
`cuLaunchKernel (libcuda.so.1)`, `0x7fc0eb8a71f5 (libc.so.6)`,
`zlib_compress (zlibmodule.c:374)` (native with debug info). `--threads` adds a
root frame `thread (5066): target-2` (or `thread (5066)` when unnamed, hex ids
on macOS); `--subprocesses` adds `process 10234:"python train.py"` above it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_THREAD = re.compile(r"thread \((0[xX][0-9a-fA-F]+|\d+)\)(?:: (.*))?\Z", re.S)
_PROCESS = re.compile(r'process (\d+):"(.*)"\Z', re.S)
_INTERPRETER = re.compile(r"python[0-9.]*\Z")
_HEX = re.compile(r"0[xX][0-9a-fA-F]+\Z")
_NATIVE_SOURCE = (".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".cu", ".cuh", ".rs", ".S")
_PYTHON_PSEUDO = ("<frozen ", "<string>", "<stdin>", "<module>")


def is_synthetic(frame: str) -> bool:
    """True for the process/thread frames py-spy adds above the real stack."""
    if frame.startswith("thread ("):
        return _THREAD.match(frame) is not None
    if frame.startswith("process "):
        return _PROCESS.match(frame) is not None
    return False


def parse_thread(frame: str) -> tuple[int | str, str] | None:
    """`thread (5066): target-2` -> (5066, "target-2"); hex ids stay strings."""
    match = _THREAD.match(frame)
    if match is None:
        return None
    tid_text, name = match.group(1), match.group(2) or ""
    tid: int | str = int(tid_text) if tid_text.isdigit() else tid_text
    return tid, name


def parse_process(frame: str) -> tuple[int, str] | None:
    """`process 10234:"python train.py"` -> (10234, "python train.py")."""
    match = _PROCESS.match(frame)
    return None if match is None else (int(match.group(1)), match.group(2))


def split_location(frame: str) -> tuple[str, str]:
    """`name (loc)` -> (name, loc); frames without a trailing `(...)` get loc ""."""
    if frame.endswith(")"):
        cut = frame.rfind(" (")
        if cut > 0:
            return frame[:cut], frame[cut + 2 : -1]
    return frame, ""


def is_native(frame: str) -> bool:
    """True for frames in a shared library, a binary, C source or a bare address.

    Python frames are `file.py:N` (or `file.py` with --nolineno), `<frozen ...>`,
    `<string>:N` and scripts without a suffix (`flameshow:6`); everything else,
    including frames with no location at all (perf-style input), is native.
    """
    name, loc = split_location(frame)
    if _HEX.match(name) or not loc:
        return not is_synthetic(frame)
    file, _, line = loc.rpartition(":")
    if not line.isdigit():
        file = loc
        return not (file.endswith((".py", ".pyx", ".pyw")) or file.startswith(_PYTHON_PSEUDO))
    if file.startswith(_PYTHON_PSEUDO) or file.endswith((".py", ".pyx", ".pyw")):
        return False
    return file.endswith(_NATIVE_SOURCE)


def is_python(frame: str) -> bool:
    """True for a Python frame: `name (file.py:N)`, `name (file.py)` (--nolineno),
    `<frozen ...>`, `<string>:N` or a script without suffix (`flameshow:6`).

    A frame is Python when it has a location and is neither native nor synthetic.
    """
    return bool(split_location(frame)[1]) and not is_native(frame) and not is_synthetic(frame)


def is_interpreter(frame: str) -> bool:
    """True for a native frame of CPython itself (`libpython3.11.so.1.0`, `python3.12`)."""
    loc = split_location(frame)[1]
    base = loc.rpartition("/")[2]
    return base.startswith("libpython") or _INTERPRETER.match(base) is not None


# --- one name per frame ------------------------------------------------------------------
# py-spy shortens a frame's file by default: it climbs from the file's folder while the
# folder holds an `__init__.py` and strips what lies above (python_spy.rs,
# `shorten_filename`), so installed code reads `transformers/trainer.py`, a script
# `train.py` and a native library `libc.so.6`. Its speedscope output, dump's `filename`
# and `--full-filenames` keep the absolute path. The host's folders are not here, so
# `short_names` follows that rule from the path alone: a Python file below an
# interpreter's package folder (`site-packages`, `dist-packages`, `lib/pythonX.Y`, `Lib`)
# keeps its path below it; one below the main script's folder (the folder of its
# `<module>` frame: Python's sys.path[0]) its path below that; every other file its last
# part. Where a folder without `__init__.py` sits below those (a namespace package), py-spy
# names less than this; `frame_key` matches both.

_PYTHON_SUFFIXES = (".py", ".pyx", ".pyw")
_SEPARATOR = re.compile(r"[/\\]")
_ABSOLUTE = re.compile(r"(?:/|[A-Za-z]:[/\\]|\\\\)")
_INTERPRETER_FOLDER = re.compile(r"python\d+(?:\.\d+)?t?\Z")
_PACKAGE_FOLDERS = frozenset({"site-packages", "dist-packages"})


def _file_and_line(frame: str) -> tuple[str, str, str] | None:
    """`name (file:12)` -> (name, file, ":12"); None for synthetic frames and frames
    without a location."""
    if is_synthetic(frame):
        return None
    name, loc = split_location(frame)
    if not loc:
        return None
    file, colon, line = loc.rpartition(":")
    if colon and line.isdigit() and file:
        return name, file, f":{line}"
    return name, loc, ""


def _below_interpreter(parts: list[str]) -> int:
    """Index of the first part below the last package folder of an interpreter; 0: none."""
    for index in range(len(parts) - 2, 0, -1):
        part = parts[index]
        if part in _PACKAGE_FOLDERS or part == "Lib":
            return index + 1
        if _INTERPRETER_FOLDER.match(part) and parts[index - 1] in ("lib", "lib64"):
            return index + 1
    return 0


def short_file(file: str, script_dir: tuple[str, ...] = ()) -> str:
    """The file as py-spy names it by default (see above); a name that is not an
    absolute path (already short, `<frozen runpy>`) stays as it is."""
    if not _ABSOLUTE.match(file):
        return file
    parts = _SEPARATOR.split(file)
    if file.endswith(_PYTHON_SUFFIXES):
        below = _below_interpreter(parts)
        if not below and script_dir and tuple(parts[: len(script_dir)]) == script_dir:
            below = len(script_dir)
        if below and below < len(parts):
            return "/".join(parts[below:])
    return parts[-1]


def script_folder(frames: Iterable[str]) -> tuple[str, ...]:
    """The main script's folder as path parts: the shallowest folder of a `<module>`
    frame whose file is an absolute Python path outside the interpreter's folders."""
    best: tuple[str, ...] = ()
    for frame in frames:
        if not frame.startswith("<module> ("):
            continue
        found = _file_and_line(frame)
        if found is None or not _ABSOLUTE.match(found[1]):
            continue
        parts = _SEPARATOR.split(found[1])
        if found[1].endswith(_PYTHON_SUFFIXES) and not _below_interpreter(parts):
            folder = tuple(parts[:-1])
            best = folder if not best or len(folder) < len(best) else best
    return best


def short_names(frames: list[str]) -> list[str]:
    """Every frame named as py-spy names it by default (`name (file:line)` with the file
    shortened, see above); synthetic frames and short names stay as they are."""
    folder = script_folder(frames)
    named = []
    for frame in frames:
        found = _file_and_line(frame)
        if found is None:
            named.append(frame)
            continue
        name, file, line = found
        short = short_file(file, folder)
        named.append(frame if short == file else f"{name} ({short}{line})")
    return named


def renamed(frames: Iterable[str]) -> dict[str, str]:
    """Full name -> py-spy's default name (short_names over the distinct `frames`), for
    the frames whose name changes: what reads stored text frame by frame (a time track's
    records, a dump) names them as a Profile of the same frames does."""
    distinct = list(dict.fromkeys(frames))
    return {f: s for f, s in zip(distinct, short_names(distinct), strict=True) if f != s}


def recorded_files(renames: dict[str, str]) -> dict[str, str]:
    """Short name -> the file the capture recorded for it (`renamed`'s full name's file,
    no line): what a tooltip shows where a user asks for the full path. Two full files
    that shorten alike give the first in sort order."""
    files: dict[str, str] = {}
    for full in sorted(renames):
        found = _file_and_line(full)
        if found is not None:
            files.setdefault(renames[full], found[1])
    return files


def installed_packages(frames: Iterable[str]) -> frozenset[str]:
    """Top-level packages (or modules) of the Python files found below an interpreter's
    package folder: once names are short (`django/utils/text.py`) only this says that
    `django` is installed code, not the user's (rules/user_code.py)."""
    found = set()
    for frame in frames:
        located = _file_and_line(frame)
        if located is None or not located[1].endswith(_PYTHON_SUFFIXES):
            continue
        parts = _SEPARATOR.split(located[1])
        below = _below_interpreter(parts) if _ABSOLUTE.match(located[1]) else 0
        if below and below < len(parts):
            found.add(parts[below].removesuffix(".py"))
    return frozenset(found)


def frame_key(frame: str) -> str:
    """What two captures' frames are matched by, whichever way each was named (py-spy's
    raw, a speedscope file's full path, a capture stored before names were shortened):
    `name (file:line)` with the file cut to its last part (`pkg/__init__.py` keeps its
    folder, as py-spy's rule always does). A function, `name (file)`, alike."""
    found = _file_and_line(frame)
    if found is None:
        return frame
    name, file, line = found
    parts = _SEPARATOR.split(file)
    keep = 2 if parts[-1] == "__init__.py" and len(parts) > 1 else 1
    return f"{name} ({'/'.join(parts[-keep:])}{line})"


class ThreadFilter:
    """The threads a user asked for, by name or by tid (decimal, or hex in any case)."""

    def __init__(self, names_or_tids: Iterable[str]) -> None:
        self.wanted = {str(t).strip() for t in names_or_tids}
        self.lowered = {t.lower() for t in self.wanted}

    def matches(self, tid: int | str, name: str) -> bool:
        return name in self.wanted or str(tid) in self.wanted or str(tid).lower() in self.lowered

    def matches_frame(self, frame: str) -> bool:
        """True for a `thread (TID): NAME` frame of a wanted thread."""
        parsed = parse_thread(frame)
        return parsed is not None and self.matches(*parsed)
