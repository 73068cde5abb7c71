"""Outside programs and services some tests need (sshd, Chromium, PostgreSQL).

On a developer's machine a missing one skips those tests with the reason. Under CI
(`CI` set, as `.ci/run` runs) it fails them instead: .ci/run installs both, so a
missing one there is a broken install step, not something to skip past.
"""

import importlib
import os
from pathlib import Path
from types import ModuleType

import pytest


def missing_reason(path: Path | str, what: str, install: str) -> str | None:
    """Why tests needing `path` cannot run here, or None when it is there."""
    if Path(path).exists():
        return None
    return f"{what} is missing at {path} ({install})"


def require(path: Path | str, what: str, install: str) -> None:
    """Skip (locally) or fail (under CI) the calling test when `path` is missing."""
    missing(missing_reason(path, what, install))


def missing(reason: str | None) -> None:
    """Skip (locally) or fail (under CI, which provides everything) for `reason`."""
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; .ci/run should have installed it")
    pytest.skip(reason)


def require_module(name: str, install: str) -> ModuleType:
    """`name` imported, or skip (locally) / fail (under CI) naming how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing(f"{name} cannot be imported ({exc}; {install})")
        raise  # not reached: missing() skipped or failed


def require_sshd() -> None:
    from tests.support.sshd import SSHD

    require(SSHD, "OpenSSH's sshd", "apt-get install openssh-server")


TORCH_PYTHON = os.environ.get(
    "TORCH_PYTHON", str(Path(__file__).resolve().parents[2] / ".torchenv" / "bin" / "python")
)


def require_torch() -> str:
    """The Python that has torch (real gloo jobs), or skip / fail naming `make torchenv`."""
    require(TORCH_PYTHON, "PyTorch's venv", "make torchenv, or set TORCH_PYTHON")
    return TORCH_PYTHON
