"""The evidence thresholds live in one module (profiles/pyspy/thresholds.py), and
docs/findings.md states each one with the same value: docs and code cannot drift."""

import ast
import re
from pathlib import Path

import pytest

from profiles.pyspy import analyze_lag, thresholds
from profiles.pyspy.compare.regression import JudgeOptions
from profiles.pyspy.rules.findings import RULES_BY_NAME

ROOT = Path(__file__).resolve().parents[3]
DOC = (ROOT / "docs" / "findings.md").read_text(encoding="utf-8")
ENGINE = ROOT / "profiles" / "pyspy"
APPLIERS = [
    "rules/findings", "job/straggler", "job/report", "job/stuck", "count/activity",
    "compare/regression", "compare/captures", "timed/periodic_stalls", "stats/batch_means",
    "formats/log", "timed/device",
]  # fmt: skip
"""The modules that apply thresholds: none may define one of its own."""


def constants() -> dict[str, float]:
    return {
        name: value
        for name, value in vars(thresholds).items()
        if name.isupper() and isinstance(value, int | float) and not isinstance(value, bool)
    }


def section(title: str) -> str:
    start = DOC.index(f"\n## {title}\n")
    end = DOC.find("\n## ", start + 1)
    return DOC[start : end if end > 0 else len(DOC)]


def table_rows(text: str) -> list[list[str]]:
    """The body rows of the markdown tables in `text`, as lists of stripped cells."""
    rows = [line.strip().strip("|").split("|") for line in text.splitlines()]
    rows = [[c.strip() for c in r] for r in rows if len(r) > 1]
    return [r for r in rows if not set(r[0]) <= {"-", " "}]


def documented() -> dict[str, str]:
    """`NAME` -> value cell, from the table of the Thresholds section."""
    found = {}
    for cells in table_rows(section("Thresholds")):
        match = re.fullmatch(r"`([A-Z][A-Z0-9_]*)`", cells[0])
        if match:
            assert match.group(1) not in found, f"{match.group(1)} is listed twice"
            found[match.group(1)] = cells[1]
    return found


def test_every_threshold_in_the_module_is_documented_with_its_value():
    listed = documented()
    assert sorted(listed) == sorted(constants())
    for name, value in constants().items():
        assert float(listed[name]) == value, f"{name}: docs say {listed[name]}, code {value}"


def test_every_threshold_has_its_reason_in_the_docs_and_the_module():
    for cells in table_rows(section("Thresholds")):
        if cells[0].startswith("`"):
            assert len(cells) == 5 and len(cells[4]) > 20, cells
    source = (ENGINE / "thresholds.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    reasons = {}
    for node, after in zip(tree.body, tree.body[1:], strict=False):
        if isinstance(node, ast.Assign) and isinstance(after, ast.Expr):
            reasons[node.targets[0].id] = after.value.value  # type: ignore[attr-defined]
    assert sorted(reasons) == sorted(constants())
    assert all(len(text) > 40 for text in reasons.values())


def test_the_rules_table_gives_each_rule_its_threshold():
    rows = {
        cells[0].strip("`"): cells[-1]
        for cells in table_rows(section("Rules"))
        if cells[0].startswith("`") and cells[-1].endswith("%")
    }
    job_rules = {
        "straggler": thresholds.COLLECTIVE_WAIT,
        "stuck": thresholds.STUCK_WAIT,
        "peer_or_device": thresholds.COLLECTIVE_WAIT,
    }
    expected = {name: rule.threshold for name, rule in RULES_BY_NAME.items()} | job_rules
    assert {name: float(cell.rstrip("%")) for name, cell in rows.items()} == expected


@pytest.mark.parametrize("module", APPLIERS)
def test_modules_that_apply_thresholds_define_none_of_their_own(module):
    """A number at module or class level of these modules is a threshold kept outside
    thresholds.py (sizes of shown lists are ints and may stay)."""
    tree = ast.parse((ENGINE / f"{module}.py").read_text(encoding="utf-8"))
    scopes = [tree, *(n for n in tree.body if isinstance(n, ast.ClassDef))]
    for scope in scopes:
        for node in scope.body:
            value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
            if isinstance(value, ast.Constant) and isinstance(value.value, float):
                pytest.fail(f"{module}.py:{node.lineno} defines a threshold: move it")


def test_the_modules_use_the_thresholds_values():
    options = JudgeOptions()
    assert (options.min_effect_points, options.false_discovery_rate, options.min_samples) == (
        thresholds.MIN_EFFECT_POINTS,
        thresholds.FALSE_DISCOVERY_RATE,
        thresholds.JUDGE_MIN_SAMPLES,
    )
    assert RULES_BY_NAME["launch_bound"].threshold == thresholds.LAUNCH_BOUND_SHARE


def _finished_log(behind_s: float) -> str:
    """py-spy's log of a 10 s capture that ended by duration `behind_s` seconds late."""
    return "\n".join(
        [
            "py-spy> Sampling process 100 times a second for 10 seconds. Press Control-C to exit.",
            f"py-spy> {behind_s:.2f}s behind in sampling, results may be inaccurate. "
            "Try reducing the sampling rate",
            "py-spy> Wrote raw flamegraph data to 'out.txt'. Samples: 900 Errors: 0",
        ]
    )


def test_the_sampler_threshold_is_where_the_lag_verdict_turns_unreliable():
    """formats/log.py decides the verdict; the finding reports SAMPLER_UNRELIABLE as its threshold:
    10 s of rounds taking just over (under) 20 s is just under (over) half of them."""
    limit = thresholds.SAMPLER_UNRELIABLE / 100
    late = 10 / limit - 10
    under, over = analyze_lag(_finished_log(late + 0.2)), analyze_lag(_finished_log(late - 0.2))
    assert under["achieved_fraction"] < limit < over["achieved_fraction"]
    assert (under["verdict"], over["verdict"]) == ("unreliable", "degraded")
