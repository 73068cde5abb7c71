"""The full path where a user asks (issue 48 item 1): frames are named as py-spy names them
by default (`evaluate (periodic_job.py:38)`), and hovering a frame of a recording that
kept absolute files shows the file it recorded under the name; the file is untrusted
text (a folder may be named anything) and stays text."""

import json

import pytest
from playwright.sync_api import expect

from profiles import pyspy
from profiles.models import Capture
from tests import factories
from tests.profiles.pyspy.golden import DATA

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HOSTILE_FOLDER = "/srv/<img src=x onerror=window.__xss=1>"


def _hover(page, name: str) -> None:
    page.wait_for_selector("#flamegraph[data-ready='1']")
    page.wait_for_timeout(400)  # labels appear after d3-flame-graph's transition
    page.locator(f'#flamegraph g[name="{name}"]').first.hover()
    expect(page.locator(".fg-tip .fg-tip-frame")).to_have_text(name)


def test_hovering_a_recorded_frame_shows_the_file_it_was_recorded_at(open_tab, teammate):
    capture = factories.timed_capture()  # a real speedscope recording, analysed as stored
    page = open_tab(teammate).goto(capture.get_absolute_url())
    _hover(page, "evaluate (periodic_job.py:38)")
    path = page.locator(".fg-tip .fg-tip-path")
    expect(path).to_have_count(1)
    assert path.text_content().endswith("/tests/data/timeline/periodic_job.py")
    assert path.text_content().startswith("/")
    # A frame py-spy names in full anyway (the thread) has no path line.
    _hover(page, "thread (28564): MainThread")
    expect(page.locator(".fg-tip .fg-tip-path")).to_have_count(0)


def test_a_hostile_recorded_file_stays_text_in_the_tooltip(open_tab, teammate):
    """A real speedscope recording whose script folder is renamed to markup."""
    text = (DATA / "speedscope.json").read_text().replace("/work/main/bench", HOSTILE_FOLDER)
    stats = json.loads(json.dumps(pyspy.analyze(pyspy.parse_profile_text(text))))
    tree = stats.pop("flamegraph")
    capture = factories.capture(
        None, stats, kind=Capture.Kind.IMPORT, original_name="evil.speedscope.json"
    )
    factories.store_tree(capture, tree)
    page = open_tab(teammate).goto(capture.get_absolute_url())
    _hover(page, "consume (workload.py:47)")
    expect(page.locator(".fg-tip .fg-tip-path")).to_have_text(f"{HOSTILE_FOLDER}/workload.py")
    assert page.locator(".fg-tip img, #flamegraph img").count() == 0
    assert page.evaluate("typeof window.__xss") == "undefined"
