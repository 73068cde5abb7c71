"""Which `--format` a record asks py-spy for (profiles.captures.timekeeping.record_format):
chrometrace where its times can be trusted, speedscope where only order and counts can."""

from types import SimpleNamespace

import pytest

from profiles.captures.timekeeping import RECORD_FORMAT, RECORD_FORMAT_TIMED, record_format


@pytest.mark.parametrize(
    ("idle", "gil", "subprocesses", "expected"),
    [
        (True, False, False, RECORD_FORMAT_TIMED),  # every thread every round: py-spy's times
        (False, False, False, RECORD_FORMAT),  # blocked threads dropped: no time at all
        (True, True, False, RECORD_FORMAT),  # only the GIL holder: no time either
        # Children come and go: the rank's next sample under a worker's thread handle says
        # when the worker was gone (profiles/pyspy/formats/chrometrace.py).
        (True, False, True, RECORD_FORMAT_TIMED),
    ],
)
def test_a_record_asks_for_chrometrace_only_where_its_times_hold(idle, gil, subprocesses, expected):
    capture = SimpleNamespace(idle=idle, gil=gil, subprocesses=subprocesses)
    assert record_format(capture) == expected
