"""A file lock the suite's processes share (the turn of tests/support/parallel.py, the
template database of tests/support/database.py)."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path
from typing import IO


@contextlib.contextmanager
def flocked(path: Path, exclusive: bool) -> Iterator[IO[str]]:
    """Hold a shared or an exclusive flock on `path` (made if missing); yields the file."""
    with open(path, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield held
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)
