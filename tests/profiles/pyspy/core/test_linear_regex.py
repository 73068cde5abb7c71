"""Every pattern a user or operator writes runs on RE2, in time linear in the text: the
review's pattern and a corpus of known ReDoS patterns match hostile frame names in
milliseconds, as keywords, as state rules and through a whole analysis; what RE2 does
not take is refused when it is saved, saying what to write instead."""

import re
import time

import pytest

from profiles import pyspy
from profiles.pyspy import AnalysisOptions, Keyword, analyze, parse_raw_lines
from profiles.pyspy.core.linear_regex import LinearPattern, PatternSet, UnsupportedPattern
from profiles.pyspy.count import keywords
from profiles.pyspy.errors import ProfileError
from profiles.pyspy.rules.rule_table import (
    StateRules,
    load_state_rules,
    normalise_native_name,
)
from profiles.pyspy.rules.state_rules import DEFAULT_RULES, StateRule

REVIEWS = "^" + ".?" * 28 + "." * 28 + "!"
# Known ReDoS patterns (OWASP's list, CVE write-ups, the review's), each with the
# text that makes a backtracking engine take exponential (or high-degree) time.
REDOS = [
    (REVIEWS, "a" * 37),
    (r"^(a+)+$", "a" * 40 + "!"),
    (r"(a+)*b", "a" * 40),
    (r"(a|aa)+$", "a" * 40 + "!"),
    (r"(a|a?)+b", "a" * 40),
    (r"^(a?){30}a{30}$", "a" * 30),
    (r"(\w+\s?)*x$", "word " * 20 + "!"),
    (r"(x+x+)+y", "x" * 40),
    (r"(.*a){20}", "a" * 40),
    (r"^(([a-z])+.)+[A-Z]([a-z])+$", "a" * 40 + "!"),
    (r"^([a-zA-Z0-9])(([\-.]|[_]+)?([a-zA-Z0-9]+))*(@){1}[a-z0-9]+[.]{1}[a-z]{2,3}$", "a" * 40),
    (r"^(\d+)*x$", "1" * 40),
    (r"^([0-9]+\s?)+$", "1 " * 20 + "x"),
    (r"(\d+\d+)+x", "1" * 40),
    (r"(.*)*x", "a" * 40),
    (r".*.*.*.*.*.*.*.*.*=", "a" * 3000),
    (r"(?i)(ab|AB)+c", "ab" * 30),
    (r"^(a|ab)*c$", "ab" * 30),
    (r"(\.\w+|\w+\.)+$", ".a" * 25 + "!"),
    (r"^(([a-z0-9])+[.]?)+@", "a" * 40 + "!"),
]
FAST_S = 0.05
LONG = 16 * 1024  # the longest frame the engine reads (limits.MAX_FRAME_CHARS)


def _seconds(call) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


@pytest.mark.parametrize(("pattern", "text"), REDOS)
def test_a_known_redos_pattern_is_accepted_and_runs_in_milliseconds(pattern, text):
    assert pyspy.keyword_problem(f"re:{pattern}") is None
    rule = keywords.parse_keyword(f"re:{pattern}")
    for name in (text, (text * (LONG // len(text) + 1))[:LONG]):
        assert _seconds(lambda n=name: rule.match.matches(f"{n} (x.py:1)")) < FAST_S


def test_the_reviews_pattern_is_exponential_on_pythons_re_and_not_here():
    # Python's re, for the record: every extra `.?.` pair doubles the time.
    # The fastest of five runs each: a run preempted on a loaded machine says nothing.
    small, larger = (
        min(
            _seconds(lambda n=n: re.search("^" + ".?" * n + "." * n + "!", "a" * (n + 5)))
            for _ in range(5)
        )
        for n in (14, 16)
    )
    assert larger > 2 * small
    linear = LinearPattern(REVIEWS)
    assert _seconds(lambda: linear.search("a" * 37)) < FAST_S
    assert _seconds(lambda: linear.search("a" * LONG)) < FAST_S


def test_an_analysis_with_every_redos_keyword_on_hostile_frames_takes_milliseconds():
    keywords = tuple(Keyword(f"re:{p}", f"c{i}") for i, (p, _) in enumerate(REDOS))
    lines = [f"main (a.py:1);{text} (x.py:{i}) 1" for i, (_, text) in enumerate(REDOS)]
    lines += [f"main (a.py:1);{'a' * (LONG - 20)}{i} (x.py:1) 1" for i in range(20)]
    profile = parse_raw_lines(lines)
    options = AnalysisOptions(keywords=keywords, include_flamegraph=False)
    started = time.perf_counter()
    stats = analyze(profile, options)
    assert time.perf_counter() - started < 2.0
    assert stats["total_samples"] == len(lines) and stats["skipped_lines"] == 0


def test_state_rules_from_a_file_run_on_re2_too(tmp_path):
    path = tmp_path / "rules.txt"
    text = "".join(f"idle: re:{pattern}\n" for pattern, _ in REDOS)
    path.write_text(text + "idle: *a*a*a*a*a*a*a*a*a*a*a*b\n", encoding="utf-8")
    rules = load_state_rules(path)
    for _, name in [*REDOS, ("", "a" * LONG)]:
        assert _seconds(lambda n=name: rules.candidates(f"{n} (libx.so)", True)) < FAST_S
    assert rules.candidates("xaaaaaaaaaaab (libx.so)", True)  # the glob still matches


@pytest.mark.parametrize(
    ("pattern", "named"),
    [
        (r"foo(?=bar)", "lookahead is not supported"),
        (r"foo(?!bar)", "negative lookahead"),
        (r"(?<=a)b", "lookbehind is not supported"),
        (r"(?<!a)b", "lookbehind is not supported"),
        (r"(a)\1", "backreferences are not supported"),
        (r"(?P<x>a)(?P=x)", "backreferences"),
        (r"a++b", "RE2 never backtracks"),
        (r"(?>a+)b", "RE2 never backtracks"),
        (r"a\Z", r"write `\z`"),
        (r"(?x) a b", "verbose mode"),
        (r"a{1001}", "up to 1000"),
        (r"((a{100}){100}){100}", "up to 1000"),
        (r"\u00e9", "write the character itself"),
        (r"(", "missing )"),
    ],
)
def test_syntax_re2_does_not_take_is_refused_at_save_saying_what_to_write(pattern, named):
    problem = pyspy.keyword_problem(f"re:{pattern}")
    assert problem and "bad regular expression" in problem and named in problem, problem
    with pytest.raises(ProfileError, match="bad pattern") as caught:
        StateRules([StateRule("idle", f"re:{pattern}")])
    assert named in str(caught.value)


@pytest.mark.parametrize("keyword", ["re:.*", "re:", "re:a|", "re:x?"])
def test_a_pattern_that_matches_every_name_stays_refused(keyword):
    assert "matches every name" in pyspy.keyword_problem(keyword)


def test_the_default_keywords_and_state_rules_all_compile_on_re2():
    assert [k.keyword for k in pyspy.GPU_KEYWORDS if pyspy.keyword_problem(k.keyword)] == []
    StateRules(DEFAULT_RULES)


def test_a_set_names_every_pattern_that_matches_and_a_name_past_utf8_is_no_error():
    found = PatternSet(["^a", "b$", "c"], whole=False)
    assert sorted(found.matching("ab")) == [0, 1] and found.matching("zz") == []
    whole = PatternSet(["a.*", "b"], whole=True)
    assert whole.matching("abc") == [0]
    assert found.matching("\ud800b") == [1]  # a lone surrogate from a speedscope name
    assert LinearPattern("b$").search("\ud800b")


def test_a_pattern_past_re2s_memory_limit_is_refused_not_run():
    with pytest.raises(UnsupportedPattern, match="more than RE2's limit"):
        LinearPattern(r"\pL{1000}")


def test_patterns_compare_and_pickle_by_their_text():
    import pickle

    def again(thing):
        return pickle.loads(pickle.dumps(thing))  # noqa: S301 — our own bytes

    assert LinearPattern("a+") == again(LinearPattern("a+"))
    assert len({LinearPattern("a"), LinearPattern("a")}) == 1
    assert again(PatternSet(["a", "b"], whole=True)).matching("b") == [1]


def test_deeply_nested_native_names_normalise_in_one_pass():
    for name in ("f" + "<" * 8000 + ">" * 8000, "f" + "(" * 8000 + ")" * 8000):
        assert _seconds(lambda n=name: normalise_native_name(n)) < FAST_S
    assert normalise_native_name("f" + "<" * 8000 + ">" * 8000) == "f<>"
    assert normalise_native_name("f(a<b)c") == "f(a<b)c"  # nothing closes across `<`


def test_re2_is_the_engines_one_import_from_outside_the_standard_library():
    import ast
    import sys
    from pathlib import Path

    outside = set()
    for path in Path(pyspy.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            top = {name.split(".")[0] for name in names}
            outside |= {(path.name, t) for t in top - sys.stdlib_module_names - {"__future__"}}
    assert outside == {("linear_regex.py", "re2")}


def test_without_re2_a_pattern_is_refused_with_the_fix_never_run_on_re(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "re2", None)  # as if google-re2 were not installed
    problem = pyspy.keyword_problem("re:^take_gil$")
    assert "pip install google-re2" in problem
    assert pyspy.keyword_problem("=take_gil") is None  # the other forms need no RE2
