"""Real captures (made here with py-spy) and corpus files against reviewed JSON."""

import pytest

from profiles.pyspy import AnalysisOptions, analyze, analyze_lag, parse_dump, read_profile
from tests.profiles.pyspy.golden import DATA, check_golden

ANALYZE_CASES = [
    "threads.txt",
    "native.txt",
    "idle.txt",
    "nolineno.txt",
    "subprocesses.txt",
    "multiline_cmdline.txt",
    "multiline_cmdline_parent.txt",
    "speedscope.json",
    "lag_duration.txt",
    "corpus_vscode_example.txt",
    "corpus_pyspy_mcp.txt",
    "corpus_pyspy_mcp_speedscope.json",
    "corpus_deepdrr_speedscope.json",
    "corpus_two_sampled_speedscope.json",
    "corpus_simple_with_invalids.txt",
    "corpus_simple_utf16_le.txt",
    "corpus_simple_crlf.txt",
    "corpus_inferno_bad_lines.txt",
    "attribution.txt",
    "attribution_root.txt",
    "torch_native_idle.txt",
    "torch_native_gil.txt",
    "torch_speedscope.json",
    "states_starved_idle.txt",
    "states_starved.txt",
    "states_backpressure_idle.txt",
    "states_gloo_rank0_idle.txt",
    "states_gloo_rank1_idle.txt",
]
DUMP_CASES = ["dump.txt", "dump_native.txt", "dump_locals.txt", "dump_json.json"]
DUMP_CASES += ["corpus_calendarbot_dump.txt"]
LAG_CASES = ["lag_ctrlc.log", "lag_tty.log"]


def _case(name: str) -> str:
    return name.split(".")[0]


@pytest.mark.parametrize("name", ANALYZE_CASES)
def test_it_matches_the_reviewed_analysis_of_each_capture(name: str) -> None:
    log = DATA / f"{name}.log"
    log_text = log.read_text(encoding="utf-8") if log.exists() else None
    options = AnalysisOptions(max_nodes=120, top_n=30)
    stats = analyze(read_profile(DATA / name), options, log_text=log_text)
    check_golden(_case(name), stats)


@pytest.mark.parametrize("name", DUMP_CASES)
def test_it_matches_the_reviewed_parse_of_each_dump(name: str) -> None:
    check_golden(_case(name), parse_dump((DATA / name).read_text(encoding="utf-8")))


@pytest.mark.parametrize("name", LAG_CASES)
def test_it_matches_the_reviewed_lag_report_of_each_log(name: str) -> None:
    check_golden(_case(name), analyze_lag((DATA / name).read_text(encoding="utf-8")))
