"""Stand-ins for the remote seam's operations in tests of the pipelines above it."""

from typing import Any


def finished(outcome: Any, kwargs: dict[str, Any]) -> Any:
    """What `runs.remote.record_many` returns for `outcome`: its `finish(outcome)` when
    the caller gave one (the whole-job pipeline stores each host's ranks inside it)."""
    finish = kwargs.get("finish")
    return finish(outcome) if finish is not None else outcome
