"""The pull reader over JSON in pieces (formats/json_stream.py): the same values as
json.loads whatever the pieces, json's own error messages at the same place in the whole
document, and its bound on one value's length; the readers built on it turn its errors
into ProfileError."""

import json
import re

import pytest

from profiles.pyspy.errors import ProfileError
from profiles.pyspy.formats import json_stream
from profiles.pyspy.formats.json_stream import JsonError, JsonStream, text_pieces
from profiles.pyspy.formats.reading import parse_profile_text

PIECE_SIZES = [1, 2, 3, 7, 64, 100_000]

DOCUMENT = json.dumps(
    {
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "shared": {
            "frames": [{"name": f"f{i} }},]", "file": "a.py", "line": i} for i in range(40)]
        },
        "profiles": [
            {"type": "sampled", "samples": [[0, 1, 2], [3]], "weights": [0.01, 1e-2, 3e2, 2.5e-3]},
            {"type": "evented", "events": [], "empty": {}, "flags": [True, False, None]},
        ],
        "unicode": 'é ☃ \u2028 "quoted" back\\slash',
        "numbers": [0, -1, 12345678901234567890, 3.5, -0.25e-3],
    },
    indent=1,
)


def walk(stream):
    """The value at the stream's position, read the way the engine's readers read."""
    char = stream.peek()
    if char == "{":
        return {key: walk(stream) for key in stream.members()}
    if char == "[":
        found = []
        for _ in stream.items():
            found.append(walk(stream))
        return found
    return stream.value()


def read_whole(text, size):
    stream = JsonStream(text_pieces(text, size))
    found = walk(stream)
    stream.end()
    return found


def json_error(text):
    with pytest.raises(json.JSONDecodeError) as raised:
        json.loads(text)
    return str(raised.value)


@pytest.mark.parametrize("size", PIECE_SIZES)
def test_walking_a_document_in_pieces_gives_what_json_loads_gives(size):
    assert read_whole(DOCUMENT, size) == json.loads(DOCUMENT)


@pytest.mark.parametrize("size", PIECE_SIZES)
def test_values_decodes_an_array_of_objects_whole_even_when_cut_inside_strings(size):
    frames = [
        {"name": f"x }},] [{i}", "file": "b.py", "line": i, "deep": {"a": [i]}} for i in range(50)
    ]
    text = json.dumps({"frames": frames})
    stream = JsonStream(text_pieces(text, size))
    keys = stream.members()
    assert next(keys) == "frames"
    assert list(stream.values()) == frames
    assert list(keys) == []
    stream.end()


def test_numbers_cut_between_pieces_are_read_whole():
    for text in ("[3.5, 2E+10, -17]", "  123456  "):
        for size in (1, 2, 3):
            assert read_whole(text, size) == json.loads(text)


def test_equal_integers_share_one_object():
    found = read_whole("[100000, 100000, 100000]", 1)
    assert found == [100000] * 3
    assert found[0] is found[1] is found[2]


NUMBER_LIST = re.compile(r"\[(\d+(?:,\d+)*)\]")


def test_match_consumes_a_pattern_at_the_read_position_only_when_it_matches():
    stream = JsonStream(text_pieces('{"s": [1,2,30], "t": "no"}', 1000))
    keys = stream.members()
    assert next(keys) == "s"
    stream.peek()
    assert stream.match(NUMBER_LIST).group(1) == "1,2,30"
    assert next(keys) == "t"
    stream.peek()
    unread = stream.buf[stream.pos :]
    assert stream.match(NUMBER_LIST) is None
    assert stream.buf[stream.pos :] == unread == '"no"}'
    assert stream.value() == "no"
    assert list(keys) == []


@pytest.mark.parametrize("size", [1, 2, 3])
def test_a_match_missed_across_pieces_consumes_nothing_so_the_value_reads_whole(size):
    stream = JsonStream(text_pieces("[[1,2,30],[4,5]]", size))
    found = []
    for _ in stream.items():
        stream.peek()
        match = stream.match(NUMBER_LIST)
        found.append([int(n) for n in match.group(1).split(",")] if match else stream.value())
    stream.end()
    assert found == [[1, 2, 30], [4, 5]]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[",
        '{"a": 1, "b": [1, 2',
        '{"a" 1}',
        "[1 2]",
        '{"a": 1,}',
        "[1, ]",
        '{"a": 1} x',
        "{1: 2}",
        '{"a": tru}',
        '{"a": "x',
        '\n\n  {"a":\n [1,\n 2,, 3]}',
    ],
)
@pytest.mark.parametrize("size", [1, 3, 100])
def test_invalid_json_gives_jsons_own_message_at_the_same_place(text, size):
    with pytest.raises(JsonError) as raised:
        read_whole(text, size)
    assert str(raised.value) == json_error(text)


def test_an_error_far_into_a_document_names_its_line_and_column_in_the_whole_document():
    text = DOCUMENT[:-2] + ",\n  ]\n}"  # a trailing comma after the last member
    with pytest.raises(JsonError) as raised:
        read_whole(text, 5)
    assert str(raised.value) == json_error(text)
    assert "line 1 " not in str(raised.value)


def test_a_value_longer_than_the_bound_is_refused_and_the_window_stays_near_it(monkeypatch):
    monkeypatch.setattr(json_stream, "MAX_JSON_VALUE_CHARS", 100)
    fits = json.dumps("x" * 98)  # 100 characters with its quotes
    assert read_whole(fits, 7) == "x" * 98
    too_long = json.dumps("x" * 99)
    with pytest.raises(JsonError, match=r"A value longer than 100 characters: line 1 column 2"):
        read_whole(f"[{too_long}]", 7)
    stream = JsonStream(text_pieces(json.dumps(["y" * 60] * 200), 7))
    widest = 0
    for _ in stream.items():
        assert stream.value() == "y" * 60
        widest = max(widest, len(stream.buf))
    assert widest <= 2 * 100, "a long array of small values never fills the window"


def test_text_pieces_cut_text_into_pieces_of_the_size_asked():
    assert list(text_pieces("abcdefg", 3)) == ["abc", "def", "g"]
    assert list(text_pieces("", 3)) == []


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            '{"profiles": [], "shared": {"frames": [',
            "input looks like JSON but is truncated or invalid "
            "(Expecting value: line 1 column 40 (char 39))",
        ),
        ("[" * 100_000 + "]" * 100_000, "input is JSON nested too deeply to be a profile"),
    ],
)
def test_the_profile_reader_turns_its_errors_into_a_profile_error_with_the_reason(text, reason):
    with pytest.raises(ProfileError) as raised:
        parse_profile_text(text)
    assert str(raised.value) == reason
