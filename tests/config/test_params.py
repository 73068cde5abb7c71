import pytest
from django.core.exceptions import ValidationError

from config.params import PID_MAX, parse_id, parse_int, parse_pid


@pytest.mark.parametrize(
    "value", ["²", "٣", "1_000", "+5", "1e3", "", " ", "0x10", None, 1.0, True]
)
def test_it_refuses_what_is_not_plain_ascii_digits(value):
    with pytest.raises(ValidationError):
        parse_int(value, name="n")


@pytest.mark.parametrize("value", [str(2**63), 2**63, "99999999999999999999"])
def test_it_refuses_ids_past_bigint(value):
    with pytest.raises(ValidationError):
        parse_id(value)


def test_it_accepts_ints_and_ascii_digit_strings():
    assert parse_int("42", name="n") == 42
    assert parse_int(" 7 ", name="n") == 7
    assert parse_id(2**63 - 1) == 2**63 - 1
    assert parse_int("-3", name="n", minimum=-5) == -3


def test_pids_stop_at_the_linux_pid_max():
    assert parse_pid(PID_MAX) == PID_MAX
    for bad in (0, PID_MAX + 1, 2**31, 2**62):
        with pytest.raises(ValidationError):
            parse_pid(bad)


def test_the_error_names_the_field():
    with pytest.raises(ValidationError) as info:
        parse_int("x", name="max_nodes")
    assert "max_nodes" in info.value.message_dict
