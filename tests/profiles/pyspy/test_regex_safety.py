"""`re:` keywords that can backtrack catastrophically are refused; usual ones are not."""

import re
import time

import pytest

from profiles import pyspy
from profiles.pyspy.regex_safety import backtracking_problem

CATASTROPHIC = [
    r"^(a+)+$",
    r"(a+)*b",
    r"(a?){30}a{30}",
    r"(\w+\s?)*x$",
    r"(a|ab)*c",
    r"(?:a|a)+b",
    r"(x+x+)+y",
    r"(.*a){12}",
    r"\d+\d+x",
    r".*.*=",
    r"a*(?:b?)a*c",
    r"(?i)(ab|AB)+c",
]
FINE = [
    r"^pthread_cond_(timed|clock)?wait",
    r"(^|[.:]|THPVariable_)item$",
    r"foo.*bar.*baz",
    r"^at::native::\w+$",
    r"(?:ab|cd)*e",
    r"(?:\.\w+)+x",
    r"(?>a+)+b",
    r"a++b",
    r"^[a-z]+_[0-9]+$",
    r"(\w|\d)+$",  # one character set once parsed: linear
    r"x{3}",
]


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_a_pattern_that_can_backtrack_catastrophically_is_refused(pattern):
    assert backtracking_problem(pattern)
    assert "exponential time" in pyspy.keyword_problem(f"re:{pattern}")


@pytest.mark.parametrize("pattern", FINE)
def test_a_usual_pattern_is_accepted(pattern):
    assert backtracking_problem(pattern) is None
    assert pyspy.keyword_problem(f"re:{pattern}") is None


def test_the_default_keywords_all_pass():
    assert [k.keyword for k in pyspy.GPU_KEYWORDS if pyspy.keyword_problem(k.keyword)] == []


def test_the_reviews_pattern_is_refused_and_really_is_exponential():
    slow = []
    for n in (16, 18):
        started = time.perf_counter()
        re.search(r"^(a+)+$", "a" * n + "!")
        slow.append(time.perf_counter() - started)
    assert slow[1] > slow[0]  # two more `a`s, about four times the work
    assert "a repeat inside a repeat" in pyspy.keyword_problem("re:^(a+)+$ under python")


@pytest.mark.parametrize("keyword", ["re:.*", "re:", "re:(", "re:a|"])
def test_empty_matching_and_invalid_patterns_stay_refused(keyword):
    assert pyspy.keyword_problem(keyword)
