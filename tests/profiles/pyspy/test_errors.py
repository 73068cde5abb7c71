"""ProfileError (errors.py): the one exception the engine raises on input it cannot use,
carrying a one-line reason for people."""

import pytest

import profiles.pyspy
from profiles.pyspy.errors import ProfileError
from profiles.pyspy.formats.reading import parse_profile_text
from profiles.pyspy.formats.time_track import TimeUnavailable, load_track


def test_it_carries_its_message_as_given():
    error = ProfileError("capture.txt is empty: py-spy wrote no samples")
    assert str(error) == "capture.txt is empty: py-spy wrote no samples"
    assert error.args == ("capture.txt is empty: py-spy wrote no samples",)


def test_it_is_a_value_error_so_callers_catching_bad_values_catch_it():
    with pytest.raises(ValueError, match="no samples"):
        raise ProfileError("no samples")


def test_the_package_exports_the_same_class_and_time_errors_are_profile_errors():
    assert profiles.pyspy.ProfileError is ProfileError
    assert issubclass(TimeUnavailable, ProfileError)


@pytest.mark.parametrize(
    ("read", "reason"),
    [
        (lambda: parse_profile_text("", "empty.txt"), "empty.txt is empty"),
        (lambda: parse_profile_text('{"profiles": [', "cut.json"), "cut.json looks like JSON"),
        (lambda: load_track(b"not json", "track.json"), "track.json is not JSON"),
    ],
)
def test_the_engine_raises_it_with_one_line_naming_the_input(read, reason):
    with pytest.raises(ProfileError) as raised:
        read()
    message = str(raised.value)
    assert message.startswith(reason)
    assert "\n" not in message
