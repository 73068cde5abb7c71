import pytest

from tests.support.recorded_jobs import record_group

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
OUT = "/tmp/look"


@pytest.mark.parametrize("case", ["straggler", "starved", "hostsync", "straggler_noidle"])
def test_look(open_tab, teammate, monkeypatch, case):
    import os

    os.makedirs(OUT, exist_ok=True)
    group, ids = record_group(monkeypatch, case)
    tab = open_tab(teammate)
    page = tab.goto(f"/groups/{group.pk}/")
    page.wait_for_selector("#job-report[data-ready='1']")
    page.locator("#job-evidence").screenshot(path=f"{OUT}/{case}_group.png")
    for n in (0, 3):
        page = tab.goto(f"/captures/{ids[n]}/")
        page.wait_for_selector("#flamegraph[data-ready='1']")
        page.locator("#findings-card").screenshot(path=f"{OUT}/{case}_r{n}_findings.png")
        page.locator("#states-card").screenshot(path=f"{OUT}/{case}_r{n}_states.png")
        page.locator("#threads").screenshot(path=f"{OUT}/{case}_r{n}_threads.png")


def test_look_compare(open_tab, teammate, monkeypatch):
    _, a = record_group(monkeypatch, "straggler")
    _, b = record_group(monkeypatch, "balanced")
    page = open_tab(teammate).goto(f"/compare/?a={a[1]}&b={b[1]}&thread=trainer")
    page.locator("#states").screenshot(path=f"{OUT}/compare_states.png")
