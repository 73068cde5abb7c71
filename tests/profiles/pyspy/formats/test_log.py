"""Lag analysis of py-spy's stdout."""

from profiles.pyspy import analyze_lag
from tests.profiles.pyspy.golden import DATA

FIRST = "py-spy> Sampling process 100 times a second for 30 seconds. Press Control-C to exit."
LAST = "py-spy> Wrote raw flamegraph data to 'out.txt'. Samples: 2900 Errors: 3"


def test_it_reads_rate_duration_samples_and_errors():
    report = analyze_lag(f"{FIRST}\n\n{LAST}\n")
    assert report["requested_rate"] == 100
    assert report["requested_duration_s"] == 30
    assert (report["samples_reported"], report["errors_reported"]) == (2900, 3)
    assert (report["verdict"], report["warnings"], report["max_behind_s"]) == ("ok", 0, 0.0)
    assert report["recommended_rate"] == 100


def test_it_reads_warnings_with_and_without_prefix_and_colour():
    log = "\n".join(
        [
            FIRST,
            "py-spy> 1.02s behind in sampling, results may be inaccurate. "
            "Try reducing the sampling rate",
            "1.50s behind in sampling, results may be inaccurate. Try reducing the sampling rate.",
            "\x1b[32m\x1b[1mpy-spy\x1b[0m\x1b[2m>\x1b[0m 2.01s behind in sampling, results may be",
            LAST,
        ]
    )
    report = analyze_lag(log)
    assert [p["behind_s"] for p in report["series"]] == [1.02, 1.5, 2.01]
    assert report["max_behind_s"] == 2.01
    assert report["warnings"] == 3


def test_it_derives_the_fraction_from_duration_when_py_spy_finished_on_its_own():
    report = analyze_lag((DATA / "lag_duration.txt.log").read_text())
    # 2 s of requested rounds took 2 + 9.23 s (measured wall time here: 11.3 s).
    assert report["achieved_fraction"] == round(2 / 11.23, 3)
    assert report["verdict"] == "unreliable"
    assert report["recommended_rate"] < report["requested_rate"]


def test_it_derives_the_fraction_from_drift_growth_after_control_c():
    report = analyze_lag((DATA / "lag_ctrlc.log").read_text())
    assert report["stop_reason"] == "Control-C pressed"
    series = report["series"]
    growth = (series[-1]["behind_s"] - series[0]["behind_s"]) / (len(series) - 1)
    assert report["achieved_fraction"] == round(1 - growth, 3)
    assert 1 <= report["recommended_rate"] < report["requested_rate"]


def test_it_calls_mild_lag_degraded_and_recommends_a_lower_rate():
    log = f"{FIRST}\npy-spy> 1.20s behind in sampling\n{LAST}"
    report = analyze_lag(log)
    assert report["verdict"] == "degraded"
    assert report["achieved_fraction"] == round(30 / 31.2, 3)
    assert report["recommended_rate"] == 76
    assert "cumulative" in report["explanation"]


def test_it_reads_the_terminal_variant_with_ansi_codes():
    report = analyze_lag((DATA / "lag_tty.log").read_text())
    assert report["requested_rate"] == 3000
    assert report["warnings"] == 5
    assert report["verdict"] == "unreliable"


def test_it_handles_a_partial_log_while_py_spy_still_runs():
    report = analyze_lag("py-spy> 1.50s behind in sampling, results may be inaccurate")
    assert report["max_behind_s"] == 1.5
    assert report["requested_rate"] is None and report["recommended_rate"] is None


def test_it_returns_none_for_text_without_py_spy_lines():
    assert analyze_lag("hello\nworld") is None
    assert analyze_lag("") is None


def test_a_log_holding_only_py_spys_error_line_reports_that_error():
    text = "Error: Failed to get process executable name. Check that the process is running.\n"
    report = analyze_lag(text)
    assert report["error"] == (
        "Failed to get process executable name. Check that the process is running."
    )
    assert report["verdict"] == "unreliable" and report["error"] in report["explanation"]
    assert report["requested_rate"] is None and report["samples_reported"] is None


def test_an_error_after_sampling_started_keeps_the_requested_rate_and_duration():
    text = (
        "py-spy> Sampling process 50 times a second for 8 seconds. Press Control-C to exit.\n"
        "Error: Permission denied (os error 13)\n"
    )
    report = analyze_lag(text)
    assert report["error"] == "Permission denied (os error 13)"
    assert (report["requested_rate"], report["requested_duration_s"]) == (50, 8)


def test_a_normal_log_has_no_error():
    report = analyze_lag("py-spy> Sampling process 100 times a second for 3 seconds.")
    assert report["error"] is None and report["verdict"] == "ok"
