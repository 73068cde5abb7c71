"""The instant a whole-job capture samples from: learned from the hosts' last captures,
a first guess for hosts never captured, never nearer than the floor nor past the cap."""

import pytest

from profiles.jobs import schedule
from profiles.models import Capture, CaptureGroup
from runs.models import Host, Run

pytestmark = pytest.mark.django_db


def _hosts(count: int, first: int = 0) -> list[Host]:
    names = [f"n{i}" for i in range(first, first + count)]
    return [Host.objects.create(name=name, transport="ssh", address=name) for name in names]


def _ranks_with_leads(host: Host, leads: list[float], key: str = "lead_s") -> None:
    group = CaptureGroup.objects.create(run=Run.objects.create(name=f"r{host.pk}-{key}"))
    for pid, lead in enumerate(leads, start=100):
        Capture.objects.create(host=host, pid=pid, group=group, progress={key: lead})


def test_hosts_never_captured_get_a_first_guess_growing_with_their_number(settings):
    settings.FLAMEDECK_GROUP_START_WAIT_S = 60
    few, many = _hosts(2), _hosts(128, first=2)
    assert schedule.start_lead_s([h.pk for h in few]) == pytest.approx(1.58)
    assert schedule.start_lead_s([h.pk for h in many]) == pytest.approx(1.5 + 0.04 * 128)


def test_the_slowest_learned_lead_sets_the_instant_with_a_margin(settings):
    settings.FLAMEDECK_GROUP_START_WAIT_S = 60
    quick, slow = _hosts(2)
    _ranks_with_leads(quick, [0.4, 0.5])
    _ranks_with_leads(slow, [2.0, 3.2])
    assert schedule.start_lead_s([quick.pk]) == pytest.approx(0.5 * 1.25 + 0.5)
    assert schedule.start_lead_s([quick.pk, slow.pk]) == pytest.approx(3.2 * 1.25 + 0.5)


def test_the_lead_never_passes_the_configured_cap(settings):
    settings.FLAMEDECK_GROUP_START_WAIT_S = 5
    (host,) = _hosts(1)
    _ranks_with_leads(host, [30.0])
    assert schedule.start_lead_s([host.pk]) == 5.0


def test_only_the_last_few_captures_of_a_host_count(settings):
    settings.FLAMEDECK_GROUP_START_WAIT_S = 60
    (host,) = _hosts(1)
    _ranks_with_leads(host, [9.0])  # long ago
    _ranks_with_leads(host, [1.0] * (schedule.HISTORY * 8))
    assert schedule.start_lead_s([host.pk]) == pytest.approx(1.75)


def test_a_dump_learns_from_the_hosts_last_dumps_else_from_their_records(settings):
    settings.FLAMEDECK_GROUP_START_WAIT_S = 60
    dumped, recorded, new = _hosts(3)
    _ranks_with_leads(dumped, [4.0])  # a record: py-spy attached before its instant
    _ranks_with_leads(dumped, [0.6], key="dump_lead_s")
    _ranks_with_leads(recorded, [2.0])
    assert schedule.start_lead_s([dumped.pk], kind="dump") == pytest.approx(0.6 * 1.25 + 0.5)
    assert schedule.start_lead_s([recorded.pk], kind="dump") == pytest.approx(2.0 * 1.25 + 0.5)
    assert schedule.start_lead_s([new.pk], kind="dump") == pytest.approx(1.54)
    # A record never learns from a dump's lead: it must also attach py-spy in time.
    assert schedule.start_lead_s([dumped.pk]) == pytest.approx(4.0 * 1.25 + 0.5)
