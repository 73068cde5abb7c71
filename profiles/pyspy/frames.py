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
