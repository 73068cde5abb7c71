"""The Timeline in headless Chromium, on real recordings with time (tests/data/timeline:
a training loop with a planted 0.8 s `evaluate()` every ~3 s), stored and analysed as the
worker does it: a strip per thread, the periodic stall's bursts marked, a window dragged
over a burst that shows its flamegraph and states and stays in the URL, the reason when
a capture keeps no time, a hostile thread name that stays text, and the whole-job page's
ranks on one clock, each linking to the same moments on its own capture page."""

import json
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import expect

from profiles.models import Capture, CaptureGroup
from tests import factories
from tests.profiles.pyspy.timeline_data import TIMELINE

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HOSTILE = "<img src=x onerror=alert(1)>"
HOSTILE_FRAME = "<img src=y onerror=alert(2)>evaluate"
STRIPS = "#timeline[data-ready='1']"


def _stall(capture: Capture) -> dict:
    return next(f for f in capture.stats["findings"] if f["rule"] == "periodic_stall")


def _window(page) -> tuple[float, float]:
    query = parse_qs(urlsplit(page.url).query)
    return float(query["from"][0]), float(query["to"][0])


def _drag(page, row, begin: float, end: float) -> None:
    """Drag across `row` (a strip's locator) from `begin` to `end`, fractions of its width."""
    row.scroll_into_view_if_needed()
    box = row.bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + begin * box["width"], y)
    page.mouse.down()
    page.mouse.move(box["x"] + (begin + end) / 2 * box["width"], y, steps=4)
    page.mouse.move(box["x"] + end * box["width"], y, steps=4)
    page.mouse.up()


def test_dragging_over_a_burst_shows_the_windows_flamegraph_states_and_keeps_it_in_the_url(
    open_tab, teammate, client
):
    capture = factories.timed_capture()
    # The rank's GPU read by nvidia-smi beside py-spy (runs/gpu.py's shape), on its clock.
    points = [
        {"t": i / 4, "util": 90.0, "mem_used_mib": 1.0, "mem_total_mib": 8.0} for i in range(56)
    ]
    Capture.objects.filter(pk=capture.pk).update(
        gpu_samples={
            "interval_ms": 250,
            "skipped_lines": 0,
            "start": capture.stats["time"]["start"],
            "gpus": [{"index": 0, "points": points}],
            "mapping": {"source": "compute-apps", "pids": [1], "gpus": [0], "note": None},
        }
    )
    client.force_login(teammate)
    line = client.get(f"/api/captures/{capture.pk}/timeline/").json()
    stall = _stall(capture)
    assert stall["thread"] == "MainThread" and "evaluate" in stall["function"]
    tab = open_tab(teammate)
    page = tab.goto(capture.get_absolute_url())
    page.wait_for_selector(STRIPS)
    expect(page.locator("#timeline g.tl-row")).to_have_count(len(line["threads"]))
    expect(page.locator("#timeline rect.tl-burst")).to_have_count(len(stall["bursts"]))
    expect(page.locator("#timeline path.tl-gpu-util")).to_have_count(1)  # on the same axis
    expect(page.locator("#tl-window")).to_be_hidden()

    # Across the middle of the second burst, on the strip of the thread that stalls.
    burst = page.locator("#timeline rect.tl-burst").nth(1)
    _drag(page, burst, 0.2, 0.8)
    page.wait_for_selector("#tl-window[data-ready='1']")
    start, end = stall["bursts"][1]
    chosen = _window(page)
    assert start <= chosen[0] < chosen[1] <= end, (chosen, stall["bursts"][1])
    expect(page.locator('#tl-window-flamegraph g[name^="evaluate ("]').first).to_be_attached()
    expect(page.locator("#tl-window-states tr[data-state='compute']")).to_have_count(1)
    expect(page.locator("#tl-window-device")).to_contain_text("90% busy on average")
    expect(page.locator("#tl-window-title")).to_contain_text(f"Window {chosen[0]:.2f} s")
    expect(page.locator("#tl-from")).to_have_value(str(chosen[0]).rstrip("0").rstrip("."))

    # The link is the view: reloading it shows the same window.
    page.reload()
    page.wait_for_selector("#tl-window[data-ready='1']")
    assert _window(page) == chosen
    expect(page.locator("#tl-window-title")).to_contain_text(f"Window {chosen[0]:.2f} s")
    expect(page.locator('#tl-window-flamegraph g[name^="evaluate ("]').first).to_be_attached()
    page.click("#tl-clear")
    expect(page.locator("#tl-window")).to_be_hidden()
    assert "from=" not in page.url


def test_hostile_thread_and_frame_names_stay_text_in_the_strips_and_their_tooltip(
    open_tab, teammate
):
    capture = factories.timed_capture(
        names={"loader": HOSTILE}, functions={"evaluate": HOSTILE_FRAME}
    )
    assert HOSTILE_FRAME in _stall(capture)["function"]
    tab = open_tab(teammate)
    page = tab.goto(capture.get_absolute_url())
    page.wait_for_selector(STRIPS)
    row = page.locator("#timeline g.tl-row", has_text="<img").locator("rect.tl-bg")
    row.scroll_into_view_if_needed()
    box = row.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 3, box["y"] + box["height"] / 2)
    tip = page.locator(".tl-tip")
    expect(tip).to_be_visible()
    expect(tip).to_contain_text(HOSTILE)
    expect(tip).to_contain_text("backpressure")
    expect(tip).to_contain_text("on the host's clock")
    # The periodic stall's function, in the tooltip over its burst.
    burst = page.locator("#timeline rect.tl-burst").first.bounding_box()
    page.mouse.move(burst["x"] + burst["width"] / 2, burst["y"] + burst["height"] / 2)
    expect(tip).to_contain_text(f"periodic stall: every {_stall(capture)['period_s']} s")
    expect(tip).to_contain_text(HOSTILE_FRAME)
    expect(page.locator(".tl-tip img, #timeline img, #tl-untimed img")).to_have_count(0)


def test_a_capture_without_time_says_why_and_draws_no_strip(open_tab, teammate):
    capture = factories.timed_capture("steady", idle=False)
    assert capture.stats["time"]["available"] is False
    page = open_tab(teammate).goto(capture.get_absolute_url())
    page.wait_for_selector("#flamegraph[data-ready='1']")
    expect(page.locator("#timeline-none")).to_contain_text("recorded without --idle")
    expect(page.locator("#timeline-card svg, #tl-form")).to_have_count(0)


@pytest.fixture
def timed_job():
    """Three ranks: rank-0 the periodic evaluation; rank-1 another recording whose host's
    clock runs 50 s ahead (offset −50 s) and which starts 0.7 s after rank-0 on the
    server's clock; rank-2 recorded without --idle (no time)."""
    run = factories.job_run(ranks=3, name="timed job")
    ranks = list(run.processes.order_by("pid"))
    group = CaptureGroup.objects.create(run=run)
    first = json.loads((TIMELINE / "periodic_eval.clock.json").read_text())["start"]
    other = json.loads((TIMELINE / "periodic_checkpoint.clock.json").read_text())["start"]
    made = [
        factories.timed_capture(process_=ranks[0], group=group, offset_s=0.0),
        factories.timed_capture(
            "periodic_checkpoint",
            process_=ranks[1],
            group=group,
            shift_s=first + 50.7 - other,
            offset_s=-50.0,
        ),
        factories.timed_capture("steady", process_=ranks[2], group=group, idle=False),
    ]
    return group, made


def test_the_whole_job_page_aligns_ranks_and_opens_a_window_on_each_ranks_own_clock(
    open_tab, teammate, timed_job
):
    group, (rank0, rank1, rank2) = timed_job
    page = open_tab(teammate).goto(group.get_absolute_url())
    page.wait_for_selector("#group-timeline[data-ready='1']")
    rows = page.locator("#group-timeline g.tl-row")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("rank-0 · MainThread")
    expect(page.locator("#group-timeline-missing")).to_contain_text("rank-2")
    expect(page.locator("#group-timeline-missing")).to_contain_text("--idle")

    _drag(page, rows.nth(0).locator("rect.tl-bg"), 0.3, 0.5)
    expect(page.locator("#group-window-links a.rank-window-link")).to_have_count(2)
    chosen = _window(page)
    links = page.locator("#group-window-links a.rank-window-link")
    hrefs = [links.nth(i).get_attribute("href") for i in range(2)]
    assert hrefs[0].startswith(f"/captures/{rank0.pk}/?")
    windows = [[float(v[0]) for v in parse_qs(urlsplit(h).query).values()] for h in hrefs]
    # rank-0 started the timeline; rank-1 started 0.7 s later on the server's clock.
    assert windows[0] == pytest.approx(list(chosen), abs=0.011)
    assert windows[1] == pytest.approx([chosen[0] - 0.7, chosen[1] - 0.7], abs=0.021)

    links.nth(1).click()
    page.wait_for_url(f"**/captures/{rank1.pk}/?from=*")
    page.wait_for_selector("#tl-window[data-ready='1']")
    assert _window(page) == tuple(windows[1])
