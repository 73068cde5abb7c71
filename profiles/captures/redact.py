"""What a viewer may not see of the flamedeck server's own processes.

A host with transport `local` is the flamedeck server itself: the command lines of its
processes (py-spy dump's `Process PID: CMD` lines, `--subprocesses` frames
`process N:"cmd"`, the host check's process list) and `dump --locals` values
(arguments, tokens, paths) are shown to host administrators only. Everyone else gets
them replaced by `HIDDEN`, on the page, in the JSON API and in downloads; every other
frame, count and thread stays as it was.

Every page, JSON answer and download that carries frame names or command lines of
captures passes its data through `for_viewer` (or, streamed, `download`): the one gate,
deciding with `hides_server_details` and hiding with `profiles.pyspy.formats.redaction`.
tests/test_redaction_walk.py walks every URL to keep it so.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

from profiles.models import Capture
from profiles.pyspy import formats as redaction
from runs.permissions import can_administer_hosts

HIDDEN = redaction.HIDDEN
T = TypeVar("T")


def hides_server_details(capture: Capture, user) -> bool:
    """Whether `user` must not see command lines and locals of this capture."""
    return bool(capture.host_id and capture.host.is_local and not can_administer_hosts(user))


def for_viewer(data: T, *, user, captures: Iterable[Capture]) -> T:
    """`data` as `user` may see it, when it carries anything of `captures`: a copy with
    command lines and locals hidden if any of them is of the server's own processes,
    else `data` itself."""
    if any(hides_server_details(c, user) for c in captures):
        return redaction.hide(data)
    return data


def download(body: Iterator[bytes], fmt: str, *, user, capture: Capture) -> Iterator[bytes]:
    """A stored file streamed as `user` may see it: "dump", "folded" or "log" text
    redacted line by line (a log line naming a process frame is cut like a folded
    line). Speedscope JSON, one document, is refused by the caller instead."""
    if not hides_server_details(capture, user):
        return body
    return redaction.dump_text(body) if fmt == "dump" else redaction.folded_text(body)


def process_frame(name: str) -> str:
    """`process 10:"python train.py"` -> `process 10:"(hidden: …)"`; others unchanged."""
    return redaction.hide_text(name)
