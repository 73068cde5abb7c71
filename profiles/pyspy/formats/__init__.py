"""formats: py-spy's files in and out. Text or bytes in, a `core.Profile` (or samples
with times) out; and the exports back to text. Nothing here judges what a stack means.

- In: `raw` (`--format raw`, collapsed stacks), `speedscope` (`--format speedscope`),
  `chrometrace` (`--format chrometrace`, samples with times), `dump` (`py-spy dump`,
  text or `--json`), `log` (py-spy's stdout: rate and lag), `reading` (open what is
  stored, gzip or UTF-16, and pick the parser by content), `json_stream` (a pull
  reader for JSON too big to load whole).
- Stored beside a capture: `split` (speedscope into raw text and a time track),
  `time_track` (when each sample was taken).
- Out: `export` (folded stacks, speedscope JSON), `redaction` (the one hiding of
  command lines and dump locals every output passes through).

A new input format: a module here that builds a `core.Profile` (raw.py is the shortest
model), its test on the head of the content in reading.py (`parse_profile_text` and
`_parse_stream` pick the parser there; `_refuse_other_kinds` names formats refused), and
tests/profiles/pyspy/formats/test_<format>.py with a real file in tests/data/.
"""

from .chrometrace import chrometrace_samples, is_chrometrace
from .reading import read_text
from .redaction import HIDDEN, dump_text, folded_text, hide, hide_text
from .split import split_speedscope
from .time_track import TimeUnavailable, load_track, track_json

__all__ = [
    "HIDDEN",
    "TimeUnavailable",
    "chrometrace_samples",
    "dump_text",
    "folded_text",
    "hide",
    "hide_text",
    "is_chrometrace",
    "load_track",
    "read_text",
    "split_speedscope",
    "track_json",
]
