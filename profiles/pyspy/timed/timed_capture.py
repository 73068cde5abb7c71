"""A capture with time: its raw text and its time track (formats/time_track.py), read once for
the timeline, windows and periodic stalls.

The raw text's records (its non-blank lines that are not `#` comments, in order) are
what the track's indexes name. They are parsed once into a Profile with raw.py's own
record reader (`folded_record`) and the same trie builder, keeping each record's leaf
node, so every sample's state (states.classify) and user frames come from one lookup
per record, never per sample. A record raw.py would skip (past the limits) keeps its
place and has no state.

Frames are named as everywhere else (frames.short_names, as a Profile of the same
frames names them): the stored text keeps what py-spy wrote (a speedscope recording's
absolute paths), and every read here (`stack`, the profile, user frames) names the
frames of the whole capture alike, so a window's text, a stall's frame and a user
function read as the capture's flamegraph does. Installed code found by its full path
stays library code once its name is short (Profile.installed).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from operator import mul

from ..core import frames as fr
from ..core.profile import Profile, ProfileBuilder
from ..count.functions import function_name
from ..errors import ProfileError
from ..formats.raw import folded_record
from ..formats.time_track import ThreadTrack, Track, require_time
from ..limits import MAX_FRAME_CHARS, MAX_LINE_CHARS, MAX_STACK_DEPTH
from ..rules.rule_table import StateRules
from ..rules.state_rules import STATES
from ..rules.states import Classified, UserCode, classify

_BYTE = [bytes([i]) for i in range(256)]
_FLAG = [b"\x00", b"\x01"]
NO_STATE = 255
"""A sample's state when it counts in no record (a malformed sample)."""


class TimedCapture:
    """A capture's records and track; ProfileError when they do not belong together,
    TimeUnavailable when the track has no times."""

    def __init__(
        self,
        raw_text: str | None,
        track: Track | None,
        *,
        state_rules: StateRules | None = None,
        library: Iterable[str] = (),
    ) -> None:
        """`raw_text` None: the track alone, whose stored states (`with_states`) are all
        a timeline needs; what reads the records (stacks, frames, a window's flamegraph)
        then raises ProfileError."""
        self.track = require_time(track)
        if raw_text is None and self.track.record_states is None:
            raise ProfileError("the time track keeps no states: the raw text is needed")
        self._lines = None if raw_text is None else _record_lines(raw_text)
        if self._lines is not None and len(self._lines) != self.track.records:
            raise ProfileError(
                f"the time track does not belong to this raw text: it names "
                f"{self.track.records} records, the text has {len(self._lines)}"
            )
        self.state_rules = state_rules
        self.library = tuple(library)
        self._names: tuple[dict[str, str], frozenset[str]] | None = None
        self._user: UserCode | None = None
        self._profile: tuple[Profile, array] | None = None
        self._states: dict[int, bytes] = {}
        self._line_states: bytes | None = None
        self._user_frames: list[list[str]] | None = None
        self._functions: list[frozenset[str]] | None = None

    @property
    def lines(self) -> list[str]:
        """The raw text's records, in order (ProfileError when read without it)."""
        if self._lines is None:
            raise ProfileError("this capture was read from its time track alone")
        return self._lines

    def stack(self, record: int) -> str:
        """A record's frames as raw text writes them (`a;b;c`), each named as the
        capture's Profile names it (module doc)."""
        text = self.lines[record].rpartition(" ")[0]
        names = self.names()
        return ";".join([names.get(f, f) for f in text.split(";")]) if names else text

    def names(self) -> dict[str, str]:
        """Full name -> short name of each frame of the records py-spy names otherwise by
        default (frames.renamed over the whole capture); empty for py-spy's raw text."""
        return self._read_names()[0]

    def _read_names(self) -> tuple[dict[str, str], frozenset[str]]:
        if self._names is None:
            seen: dict[str, None] = {}
            for line in self.lines:
                record = folded_record(line) if len(line) <= MAX_LINE_CHARS else None
                if record is not None:
                    seen.update(dict.fromkeys(record[0]))
            self._names = fr.renamed(seen), fr.installed_packages(seen)
        return self._names

    @property
    def installed(self) -> frozenset[str]:
        """Packages the records' full paths show installed (frames.installed_packages)."""
        return self._read_names()[1]

    @property
    def user(self) -> UserCode:
        """The user's-code test: the library entries given, and the packages the
        records' full paths show installed (Profile.installed)."""
        if self._user is None:
            self._user = UserCode((*self.library, *self._read_names()[1]))
        return self._user

    def profile(self) -> tuple[Profile, array]:
        """The records as a Profile, and each record's leaf node (-1: skipped). Frames
        are added already named (`names`), so the Profile merges no nodes and a record's
        leaf stays its node."""
        if self._profile is None:
            builder, leaves = ProfileBuilder(), array("i")
            names, installed = self._read_names()
            for line in self.lines:
                record = folded_record(line) if len(line) <= MAX_LINE_CHARS else None
                if record is None or not _within_limits(record[0]):
                    leaves.append(-1)
                else:
                    stack = [names.get(f, f) for f in record[0]] if names else record[0]
                    leaves.append(builder.add(stack, record[1]))
            profile = builder.build("raw")
            profile.installed, profile.renamed = installed, names
            self._profile = profile, leaves
        return self._profile

    def classified(self) -> Classified:
        profile, _ = self.profile()
        return classify(profile, self.state_rules, self.user)

    def line_states(self) -> bytes:
        """Per record, its state's index in STATES; one more entry, NO_STATE, that a
        NO_LINE (-1) index picks. Read from the track when the analysis stored them
        (`with_states`), else classified here."""
        if self._line_states is None:
            stored = self.track.record_states
            if stored is not None:
                index = {name: i for i, name in enumerate(STATES)}
                found = bytearray(index.get(s, NO_STATE) if s else NO_STATE for s in stored)
            else:
                _, leaves = self.profile()
                state = self.classified().state
                found = bytearray(state[leaf] if leaf >= 0 else NO_STATE for leaf in leaves)
            found.append(NO_STATE)
            self._line_states = bytes(found)
        return self._line_states

    def state_flags(self, thread: ThreadTrack, states: Iterable[str]) -> bytes:
        """1 for each of the thread's samples in one of `states`, else 0, in order: the
        series stats/batch_means.py judges over time blocks."""
        wanted = {STATES.index(s) for s in states}
        table = bytes(1 if i in wanted else 0 for i in range(256))
        return self.sample_states(thread).translate(table)

    def marks(self, signal: str, is_function: bool) -> bytes:
        """Per record, 1 when it has the signal (a user function anywhere on its stack,
        or its state), else 0; one more 0 entry, that a NO_LINE (-1) index picks."""
        if is_function:
            found = bytearray(signal in names for names in self.user_functions())
        else:
            index = STATES.index(signal)
            found = bytearray(s == index for s in self.line_states()[:-1])
        found.append(0)
        return bytes(found)

    def flags(self, thread: ThreadTrack, marks: bytes) -> bytes:
        """1 for each of the thread's samples whose record `marks` marks, else 0, in
        order (a byte per run, repeated by its length: no Python code per sample)."""
        values, runs = thread.runs()
        return b"".join(map(mul, map(_FLAG.__getitem__, map(marks.__getitem__, values)), runs))

    def sample_states(self, thread: ThreadTrack) -> bytes:
        """The state of each of the thread's samples, in order (cached per thread): one
        byte per run repeated by its length, so no Python code runs per sample."""
        key = id(thread)
        found = self._states.get(key)
        if found is None:
            values, runs = thread.runs()
            per_run = map(_BYTE.__getitem__, map(self.line_states().__getitem__, values))
            found = self._states[key] = b"".join(map(mul, per_run, runs))
        return found

    def timed(self) -> list[ThreadTrack]:
        """The threads sampled in every round, by name then tid."""
        return sorted(self.track.timed(), key=lambda t: (t.name, str(t.tid)))

    def user_frames(self) -> list[list[str]]:
        """Per record, the frames of the user's own code on its stack, root first (cached)."""
        if self._user_frames is None:
            is_user = self.user.is_user
            self._user_frames = [
                [f for f in self.stack(r).split(";") if is_user(f)] for r in range(len(self.lines))
            ]
        return self._user_frames

    def user_functions(self) -> list[frozenset[str]]:
        """Per record, the user functions (functions.function_name) on its stack (cached)."""
        if self._functions is None:
            self._functions = [frozenset(map(function_name, f)) for f in self.user_frames()]
        return self._functions

    def seconds(self, k: int) -> float:
        """Round k's time, in seconds since the first sample."""
        return self.track.at(k)


def _record_lines(raw_text: str) -> list[str]:
    return [
        line.rstrip("\r")
        for line in raw_text.split("\n")
        if line.strip() and not line.startswith("#")
    ]


def _within_limits(frames: list[str]) -> bool:
    return len(frames) <= MAX_STACK_DEPTH and max(map(len, frames)) <= MAX_FRAME_CHARS


def state_name(index: int) -> str | None:
    return STATES[index] if index < len(STATES) else None


def with_states(
    track: Track,
    raw_text: str,
    *,
    state_rules: StateRules | None = None,
    library: Iterable[str] = (),
) -> Track:
    """The track with each record's state (classified with the analysis's rules), to
    store: timelines and window states are then read without classifying anything.
    A track without times is returned as it is."""
    if not track.exact or not track.timed():
        return track
    capture = TimedCapture(raw_text, track, state_rules=state_rules, library=library)
    track.record_states = [state_name(i) for i in capture.line_states()[:-1]]
    return track
