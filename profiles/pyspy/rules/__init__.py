"""rules: what a sample means. Tables of plain records, compiled once; stacks in, one
thread state, the user's frame, the framework's step and findings out.

- `state_rules` (the default thread-state table: STATES and their rules), compiled by
  `rule_table` and applied by `states` (every sample in exactly one state).
- `user_code`: which frames are the user's own code.
- `framework_rules` (the default framework-step table), applied by `framework`.
- `step_threads`: the threads that run the training step, which every finding reads.
- `findings`: what a capture says to change, one documented rule each.

A new state rule: a record in state_rules.py (or the user's own table,
FLAMEDECK_STATE_RULES). A new framework: records in framework_rules.py. A new finding:
a function in findings.py with its threshold in thresholds.py (its reason beside it),
listed in findings_for_capture, tested in tests/profiles/pyspy/rules/test_findings.py.
A finding that needs time (bursts, windows) goes in timed/, one over ranks in job/.
"""

from .state_rules import STATES
from .step_threads import capture_threads, pool, step_threads

__all__ = ["STATES", "capture_threads", "pool", "step_threads"]
