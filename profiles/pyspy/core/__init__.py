"""core: what every other part stands on. Standard library and RE2 only; imports
nothing of the engine but its top leaves (errors, limits, thresholds).

- `profile.Profile`: samples as a prefix tree (trie) of stacks, one stack at a time in;
  counts per node out. Every parser builds one; every count reads one.
- `frames`: what one py-spy frame string says (process/thread frame, Python or native,
  file and line, `frame_key` for comparing names across formats).
- `types`: the JSON shapes the engine hands out (TypedDicts), read by the API schema.
- `rank_names`: rank names in natural order and short labels for lists of ranks.
- `linear_regex`: the patterns users and operators write, on RE2 (linear time).
"""

from . import types
from .profile import Profile

__all__ = ["Profile", "types"]
