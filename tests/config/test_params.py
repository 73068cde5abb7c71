import pytest
from django.core.exceptions import ValidationError

from config.params import PID_MAX, parse_float, parse_id, parse_int, parse_pid, query_int


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


@pytest.mark.parametrize(
    "value", ["٣", "1_0", "nan", "inf", "1e3", "", True, None, [], float("nan"), 2**63, 1e308]
)
def test_a_number_is_finite_plain_ascii_and_in_range(value):
    with pytest.raises(ValidationError) as info:
        parse_float(value, name="hours", minimum=0, maximum=720)
    assert "hours" in info.value.message_dict


def test_it_accepts_numbers_and_decimal_strings():
    assert parse_float("2.5", name="n", minimum=0, maximum=10) == 2.5
    assert parse_float(3, name="n", minimum=0, maximum=10) == 3.0
    assert parse_float(" -1 ", name="n", minimum=-2, maximum=0) == -1.0


@pytest.mark.parametrize("value", [0.027212607360086242, 0.00012345678901234567, 1.5e-07])
def test_a_small_double_as_python_writes_it_reads_back_exactly(value):
    assert parse_float(repr(value), name="to", minimum=0, maximum=1) == value


@pytest.mark.parametrize(
    "value", ["99999999999999999999999", "-99999999999999999999", "9" * 5000, 10**22]
)
def test_too_many_digits_is_out_of_range_not_a_bad_number(value):
    """A page's form field (a string) and a JSON body (an int) give the same answer."""
    with pytest.raises(ValidationError) as info:
        parse_id(value, name="alert")
    assert info.value.message_dict == {"alert": [f"alert must be between 1 and {2**63 - 1}"]}


def test_leading_zeros_and_a_minus_sign_still_parse():
    assert parse_int("0" * 5000 + "42", name="n") == 42
    assert parse_int("-0007", name="n", minimum=-10) == -7
    assert parse_int("-0", name="n") == 0


def test_a_blank_query_number_is_absent_on_a_page_and_refused_by_the_api():
    assert query_int({"limit": " "}, "limit") is None and query_int({}, "limit") is None
    assert query_int({}, "limit", allow_blank=False) is None
    with pytest.raises(ValidationError) as info:
        query_int({"limit": ""}, "limit", allow_blank=False)
    assert "limit" in info.value.message_dict
