"""Each analysis runs in a child process under a time and a memory limit, heartbeats
while it runs, is claimed once per hand-over, and ends failed naming the limit that
stopped it; the reaper re-sends a lost analysis a few times at most."""

import os
import time

import pytest
from django.utils import timezone

from profiles import pyspy
from profiles.captures import analysis, budget, enqueue, services
from profiles.captures.lifecycle import capture_claim_analysis
from profiles.models import Capture, KeywordSet
from tests.profiles.web.test_views import RAW, imported
from tests.support.procs import children

pytestmark = pytest.mark.django_db


def _sleep_then(seconds: float, value: object) -> object:
    time.sleep(seconds)
    return value


def _hog(mb: int) -> int:
    blocks = [bytearray(1024 * 1024) for _ in range(mb)]
    return len(blocks)


def _raise() -> None:
    raise pyspy.ProfileError("no samples here")


def test_the_child_returns_its_result_and_what_it_used():
    ticks = []
    value, usage = budget.run_bounded(
        _sleep_then, (1.2, {"a": [1, 2]}), time_limit_s=30, memory_mb=256,
        on_tick=lambda: ticks.append(1), tick_s=0.2,
    )  # fmt: skip
    assert value == {"a": [1, 2]} and usage.seconds >= 1.2 and usage.peak_mb > 0
    assert len(ticks) >= 4  # the heartbeat ran while the child worked


def test_an_exception_in_the_child_is_raised_in_the_parent():
    with pytest.raises(pyspy.ProfileError, match="no samples here"):
        budget.run_bounded(_raise, (), time_limit_s=30, memory_mb=256)


def test_the_time_limit_kills_the_child_and_names_the_limit():
    # This test process may have children of its own (a browser, an sshd started by
    # an earlier test): the analysis child must be gone, reaped, not a zombie.
    before = children(os.getpid())
    started = time.monotonic()
    with pytest.raises(budget.BudgetExceeded, match="time limit of 1 s") as caught:
        budget.run_bounded(_sleep_then, (60, None), time_limit_s=1, memory_mb=256)
    assert caught.value.cause == "analysis_time_limit" and time.monotonic() - started < 10
    assert children(os.getpid()) <= before  # reaped: no child left behind


def test_the_memory_limit_stops_the_child_and_names_the_limit():
    with pytest.raises(budget.BudgetExceeded, match="Analysis stopped at 128 MB") as caught:
        budget.run_bounded(_hog, (1024,), time_limit_s=60, memory_mb=128)
    assert caught.value.cause == "analysis_memory_limit"
    value, _ = budget.run_bounded(_hog, (16,), time_limit_s=60, memory_mb=128)
    assert value == 16  # under the limit it runs


@pytest.fixture
def parsing(owner):
    """A stored import handed over for analysis again (its message not sent: the test's
    transaction never commits)."""
    capture = imported(owner)
    default = KeywordSet.objects.get(is_default=True)
    return services.capture_reanalyze(capture=capture, keyword_set=default, enqueue=True)


def _slow_engine(monkeypatch, seconds: float) -> None:
    real = analysis.engine_outputs
    monkeypatch.setattr(analysis, "engine_outputs", lambda *args: _sleep_then(seconds, real(*args)))


def test_an_analysis_past_its_time_limit_ends_failed_naming_it_and_is_never_resent(
    parsing, settings, monkeypatch, django_capture_on_commit_callbacks
):
    settings.FLAMEDECK_ANALYSIS_TIME_S, settings.FLAMEDECK_ANALYSIS_S_PER_MB = 1, 0
    _slow_engine(monkeypatch, 60)
    assert analysis.capture_analyze_stored(capture_id=parsing.pk) == "failed"
    parsing.refresh_from_db()
    assert parsing.status == "failed" and parsing.error_cause == "analysis_time_limit"
    assert "time limit of 1 s" in parsing.error and "raw file and log are kept" in parsing.error
    assert parsing.raw_file and parsing.progress["analysis"]["stopped"] is True
    sent = []
    monkeypatch.setattr(enqueue, "analysis_enqueue", lambda *, capture_id: sent.append(capture_id))
    Capture.objects.filter(pk=parsing.pk).update(
        heartbeat_at=timezone.now() - timezone.timedelta(hours=1)
    )
    with django_capture_on_commit_callbacks(execute=True):
        services.reap_lost_captures(timeout_s=60)
    assert sent == [] and Capture.objects.get(pk=parsing.pk).status == "failed"


def test_an_analysis_past_its_memory_limit_ends_failed_naming_it(parsing, settings, monkeypatch):
    settings.FLAMEDECK_ANALYSIS_MEMORY_MB = 128
    monkeypatch.setattr(analysis, "engine_outputs", lambda *args: _hog(2048))
    analysis.capture_analyze_stored(capture_id=parsing.pk)
    parsing.refresh_from_db()
    assert parsing.status == "failed" and parsing.error_cause == "analysis_memory_limit"
    assert parsing.error.startswith("Analysis stopped at 128 MB, its memory limit")


def test_the_time_limit_grows_with_the_file(settings):
    settings.FLAMEDECK_ANALYSIS_TIME_S, settings.FLAMEDECK_ANALYSIS_S_PER_MB = 60, 2
    assert analysis.analysis_time_limit_s(0) == 60
    assert analysis.analysis_time_limit_s(512 * 1024 * 1024) == 60 + 1024


def test_an_analysis_heartbeats_while_it_runs(parsing, monkeypatch):
    _slow_engine(monkeypatch, 2.5)
    started = timezone.now()
    assert analysis.capture_analyze_stored(capture_id=parsing.pk) == "done"
    beat = Capture.objects.get(pk=parsing.pk).heartbeat_at
    assert (beat - started).total_seconds() >= 2


def test_a_second_delivery_of_a_capture_being_analysed_is_a_no_op(parsing):
    stale = timezone.now() - timezone.timedelta(seconds=60)
    assert capture_claim_analysis(capture_id=parsing.pk, stale_before=stale) is not None
    assert analysis.capture_analyze_stored(capture_id=parsing.pk) == "skipped"
    assert capture_claim_analysis(capture_id=parsing.pk, stale_before=stale) is None
    assert Capture.objects.get(pk=parsing.pk).analysis_attempts == 1


def test_a_claim_whose_heartbeat_went_stale_can_be_taken_over(parsing):
    old = timezone.now() - timezone.timedelta(seconds=120)
    capture_claim_analysis(capture_id=parsing.pk, stale_before=old)
    Capture.objects.filter(pk=parsing.pk).update(heartbeat_at=old)
    assert analysis.capture_analyze_stored(capture_id=parsing.pk) == "done"
    assert Capture.objects.get(pk=parsing.pk).analysis_attempts == 2


def test_the_reaper_resends_a_lost_analysis_a_few_times_then_fails_it(
    parsing, monkeypatch, django_capture_on_commit_callbacks
):
    sent = []
    monkeypatch.setattr(enqueue, "analysis_enqueue", lambda *, capture_id: sent.append(capture_id))
    old = timezone.now() - timezone.timedelta(seconds=120)
    for attempt in range(1, services.MAX_ANALYSIS_ATTEMPTS + 1):
        capture_claim_analysis(capture_id=parsing.pk, stale_before=timezone.now())
        Capture.objects.filter(pk=parsing.pk).update(heartbeat_at=old)  # its worker died
        with django_capture_on_commit_callbacks(execute=True):
            services.reap_lost_captures(timeout_s=60)
        capture = Capture.objects.get(pk=parsing.pk)
        assert capture.analysis_attempts == attempt
    assert sent == [parsing.pk] * (services.MAX_ANALYSIS_ATTEMPTS - 1)
    assert capture.status == "failed" and capture.error_cause == "analysis_lost"
    assert f"started {services.MAX_ANALYSIS_ATTEMPTS} times" in capture.error


def test_a_failed_capture_reanalysed_to_done_loses_its_old_error(parsing, settings, monkeypatch):
    settings.FLAMEDECK_ANALYSIS_TIME_S, settings.FLAMEDECK_ANALYSIS_S_PER_MB = 1, 0
    _slow_engine(monkeypatch, 60)
    analysis.capture_analyze_stored(capture_id=parsing.pk)
    assert Capture.objects.get(pk=parsing.pk).error
    monkeypatch.undo()
    capture = services.capture_reanalyze(
        capture=Capture.objects.get(pk=parsing.pk),
        keyword_set=KeywordSet.objects.get(is_default=True),
    )
    assert capture.status == "done"
    assert (capture.error, capture.error_cause, capture.error_detail) == ("", "", "")
    assert capture.stats["total_samples"] == sum(int(x.rsplit(" ", 1)[1]) for x in RAW.splitlines())


def _compiled_in_child(texts: list[str]) -> tuple[bool, int]:
    """In an analysis child: whether the default state rules are already built, and how
    many of these keywords it had to compile itself."""
    from profiles.pyspy.count import keywords
    from profiles.pyspy.rules import rule_table

    before = keywords.compiled_keyword.cache_info().misses
    for text in texts:
        keywords.compiled_keyword(text)
    compiled = keywords.compiled_keyword.cache_info().misses - before
    return rule_table._DEFAULT_RULES is not None, compiled


def test_a_child_inherits_the_rules_and_keywords_its_worker_prepared():
    """A whole job brings a thousand analyses, a child each: compiling the state rules
    and keywords in every child cost more than the engine on a small rank."""
    options = pyspy.AnalysisOptions(
        keywords=(*pyspy.GPU_KEYWORDS, pyspy.Keyword("re:^fresh_[0-9]+$", "cat"))
    )
    pyspy.prepare_analysis(options)
    texts = [k.keyword for k in options.keywords]
    (built, compiled), _ = budget.run_bounded(
        _compiled_in_child, (texts,), time_limit_s=30, memory_mb=256
    )
    assert (built, compiled) == (True, 0)
    (_, compiled), _ = budget.run_bounded(
        _compiled_in_child, (["re:^never_prepared$"],), time_limit_s=30, memory_mb=256
    )
    assert compiled == 1  # what the worker did not prepare, the child compiles
