"""Judging a done capture against the watches of its rank: verdicts stored with the
capture, one alert per change, returns, acknowledgements, snoozes, the series."""

import pytest
from django.test import override_settings

from profiles.watches.judging import capture_judge
from profiles.watches.models import Alert, Delivery, Judgement
from profiles.watches.services import alerts_acknowledge, watch_snooze, watch_update
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def watched(baseline):
    return factories.watch(baseline, targets=[factories.target()])


def judge_new(rank, minutes_ago=0, total=5000, **shares):
    capture = factories.capture(
        rank, factories.state_stats(total, **shares), minutes_ago=minutes_ago
    )
    return capture, capture_judge(capture_id=capture.pk)


def test_an_unchanged_capture_is_judged_within_noise_and_sends_nothing(rank, watched):
    capture, deliveries = judge_new(rank, host_sync=3.1)
    judgement = Judgement.objects.get(capture=capture)
    assert judgement.verdict == "unchanged" and judgement.moved == []
    assert deliveries == [] and not Alert.objects.exists()


def test_a_changed_capture_opens_one_alert_and_one_message_per_target(rank, watched):
    watched.targets.add(factories.target("pager", "json://127.0.0.1:9/other"))
    capture, deliveries = judge_new(rank, host_sync=11.4)
    judgement = Judgement.objects.get(capture=capture)
    assert judgement.verdict == "changed"
    # The rise of host sync is the fall of compute (the rest of the samples): two rows.
    assert {(a.key, a.direction) for a in Alert.objects.all()} == {
        ("state:host_sync", 1),
        ("state:compute", -1),
    }
    assert set(Alert.objects.values_list("status", flat=True)) == {"open"}
    sent = Delivery.objects.filter(pk__in=deliveries)
    assert sorted(d.target_name for d in sent) == ["pager", "team-hook"]


@override_settings(FLAMEDECK_BASE_URL="https://flamedeck.example.org")
def test_the_message_names_run_rank_capture_each_row_and_links_to_compare(rank, watched):
    capture, deliveries = judge_new(rank, host_sync=11.4)
    delivery = Delivery.objects.get(pk=deliveries[0])
    assert "llama-70b" in delivery.title and "rank-0" in delivery.title
    body = delivery.body
    assert f"capture #{capture.pk}" in body and f"baseline #{watched.baseline_id}" in body
    assert "host sync 3.1% [2.6–3.6] → 11.4% [10.6–12.3]" in body and "real change" in body
    compare = f"https://flamedeck.example.org/compare/?a={watched.baseline_id}&b={capture.pk}"
    assert compare in body
    assert f"https://flamedeck.example.org/captures/{capture.pk}/" in body


def test_a_change_that_holds_is_not_said_twice(rank, watched):
    judge_new(rank, minutes_ago=2, host_sync=11.4)
    _, again = judge_new(rank, host_sync=11.6)
    assert again == [] and Alert.objects.filter(status="open").count() == 2


def test_an_alert_resolves_when_the_share_returns_and_a_new_change_is_said(rank, watched):
    judge_new(rank, minutes_ago=3, host_sync=11.4)
    judge_new(rank, minutes_ago=2, host_sync=3.2)
    assert set(Alert.objects.values_list("status", flat=True)) == {"resolved"}
    _, deliveries = judge_new(rank, host_sync=10.0)
    assert len(deliveries) == 1 and Alert.objects.filter(status="open").count() == 2


def test_after_an_acknowledgement_a_change_still_there_is_said_once_more(rank, watched, owner):
    judge_new(rank, minutes_ago=3, host_sync=11.4)
    assert alerts_acknowledge(watch=watched, user=owner) == 2
    _, deliveries = judge_new(rank, minutes_ago=2, host_sync=11.4)
    assert len(deliveries) == 1
    _, quiet = judge_new(rank, host_sync=11.4)
    assert quiet == []


def test_a_snoozed_watch_judges_but_opens_no_alert_until_the_snooze_ends(rank, watched):
    watch_snooze(watch=watched, hours=4)
    capture, deliveries = judge_new(rank, minutes_ago=2, host_sync=11.4)
    judgement = Judgement.objects.get(capture=capture)
    assert judgement.verdict == "changed" and judgement.snoozed
    assert deliveries == [] and not Alert.objects.exists()
    watch_snooze(watch=watched, hours=0)
    _, deliveries = judge_new(rank, host_sync=11.4)
    assert len(deliveries) == 1


def test_too_few_samples_say_so_in_one_message_until_a_capture_is_judged_again(rank, watched):
    capture, deliveries = judge_new(rank, total=200, host_sync=40)
    judgement = Judgement.objects.get(capture=capture)
    assert judgement.verdict == "too few samples" and "200" in judgement.reason
    assert not Alert.objects.exists() and len(deliveries) == 1
    body = Delivery.objects.get(pk=deliveries[0]).body
    assert judgement.reason in body and "minimum samples a side (now 300)" in body
    assert judge_new(rank, total=250, host_sync=40)[1] == []  # said once, not at every capture
    assert judge_new(rank, host_sync=3.1)[1] == []  # judged again: within noise
    assert len(judge_new(rank, total=200, host_sync=40)[1]) == 1  # a new stretch: said again


def test_a_watch_made_with_defaults_judges_a_default_capture(rank, watched):
    """30 s at 20 Hz gives a step thread 600 samples: the default minimum lets it judge."""
    assert watched.min_samples == 300
    capture, _ = judge_new(rank, total=600, host_sync=40)
    assert Judgement.objects.get(capture=capture).verdict == "changed"


def test_a_watch_whose_baseline_was_deleted_says_so_once(rank, watched, baseline):
    baseline.delete()
    capture, deliveries = judge_new(rank, host_sync=3.1)
    judgement = Judgement.objects.get(capture=capture)
    assert judgement.verdict == "no baseline" and "baseline capture was deleted" in judgement.reason
    assert len(deliveries) == 1 and judge_new(rank, host_sync=3.1)[1] == []


def test_only_captures_of_the_watched_rank_after_the_baseline_are_judged(rank, watched):
    other = factories.process(rank.run, "rank-1", pid=5151)
    judge_new(other, host_sync=11.4)
    judge_new(rank, minutes_ago=120, host_sync=11.4)
    stranger = factories.capture(None, factories.state_stats(5000, host_sync=11.4), run_=rank.run)
    capture_judge(capture_id=stranger.pk)
    assert not Judgement.objects.exists()


def test_a_capture_that_is_not_done_is_not_judged(rank, watched):
    parsing = factories.capture(rank, factories.state_stats(5000, host_sync=11.4), status="parsing")
    assert capture_judge(capture_id=parsing.pk) == [] and not Judgement.objects.exists()


def test_a_new_baseline_closes_the_alerts_and_starts_a_new_series(rank, watched):
    capture, _ = judge_new(rank, host_sync=11.4)
    watch_update(watch=watched, baseline=capture)
    assert set(Alert.objects.values_list("status", flat=True)) == {"rebaselined"}
    watched.refresh_from_db()
    assert watched.shifts == [] and watched.baseline_id == capture.pk


def test_a_slow_drift_no_single_pair_shows_is_caught_by_the_series(rank):
    # 1,000 samples a capture: a 2.5-point rise of a 10% share is within one pair's noise.
    baseline = factories.capture(rank, factories.state_stats(1000, data_wait=10), minutes_ago=99)
    watch = factories.watch(baseline, targets=[factories.target()], min_samples=500)
    levels = [10, 10.1, 9.9, 10, 10.2, 9.8, 10, 12.5, 12.4, 12.6, 12.5, 12.3, 12.7, 12.5]
    sent, captures = [], []
    for minutes, level in zip(range(len(levels), 0, -1), levels, strict=True):
        capture, deliveries = judge_new(rank, minutes_ago=minutes, total=1000, data_wait=level)
        assert Judgement.objects.get(capture=capture).verdict == "unchanged"
        sent, captures = sent + deliveries, captures + [capture.pk]
    watch.refresh_from_db()
    shift = next(s for s in watch.shifts if s["key"] == "state:data_wait")
    assert shift["significant"] and shift["delta_points"] > 2
    assert shift["capture"] == captures[levels.index(12.5)]
    alerts = Alert.objects.filter(source="series")
    assert {(a.key, a.direction) for a in alerts} == {("state:data_wait", 1), ("state:compute", -1)}
    assert len(sent) == 1 and "shifted from" in Delivery.objects.get(pk=sent[0]).body


def test_trimming_scheduled_captures_keeps_a_watchs_baseline(rank):
    from profiles.jobs.services import scheduled_captures_trim
    from profiles.models import Capture

    stats = factories.state_stats(5000, host_sync=3.1)
    made = [factories.capture(rank, stats, minutes_ago=100 - i, scheduled=True) for i in range(5)]
    factories.watch(made[0])  # the oldest: first to go under the newest-N rule
    rank.run.schedule_keep = 2
    rank.run.save(update_fields=["schedule_keep"])
    assert scheduled_captures_trim(run=rank.run) == 2
    kept = set(Capture.objects.filter(run=rank.run).values_list("pk", flat=True))
    assert kept == {made[0].pk, made[3].pk, made[4].pk}
