"""Frame names come from the profiled program: a crafted capture whose frames carry
<script> and <img onerror> must render as text in the flamegraph labels, its
tooltip, the tables, search and comments, and never run."""

import pytest
from playwright.sync_api import expect

from profiles.models import Capture
from tests.profiles.test_views import IMG, RAW, XSS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_crafted_frame_names_stay_text_everywhere(open_tab, teammate, tmp_path):
    raw = tmp_path / "evil.txt"
    # wide evil frames, so the flamegraph draws their labels
    raw.write_text(RAW.replace(" 10\n", " 400\n").replace(" 5\n", " 300\n"))
    page = open_tab(teammate).goto("/captures/import/")
    page.set_input_files("#id_file", str(raw))
    page.click("form.stacked button[type=submit]")
    page.wait_for_selector("#flamegraph[data-ready='1']")
    capture = Capture.objects.get()
    assert capture.status == Capture.Status.DONE, capture.error

    expect(page.locator("#top-self")).to_contain_text(XSS)
    expect(page.locator("#top-total")).to_contain_text(IMG)
    evil = page.locator('#flamegraph g[name^="<script>"]').first
    page.wait_for_timeout(400)  # labels appear after d3-flame-graph's transition
    expect(evil.locator(".d3-flame-graph-label")).to_have_text(XSS + " (evil.py:1)")
    evil.hover()
    expect(page.locator(".fg-tip .fg-tip-frame")).to_have_text(XSS + " (evil.py:1)")
    page.locator('#flamegraph g[name^="<img"]').first.hover()
    expect(page.locator(".fg-tip .fg-tip-frame")).to_have_text(IMG + " (evil.py:2)")

    page.fill("#fg-search", "<script>")
    expect(page.locator("#fg-search-info")).to_contain_text("1 frame match")
    page.locator("#top-self .frame-link", has_text="<script>").click()
    expect(page.locator("#fg-focus")).to_contain_text(XSS)

    page.fill(".commentform textarea", f"see {IMG} and {XSS}")
    page.check("#pin-frame")
    page.click(".commentform button[type=submit]")
    expect(page.locator(".comments .pin")).to_contain_text("<script>")
    assert (
        page.locator(".comments img, .comments script, #flamegraph img, #top-self img").count() == 0
    )
    assert page.evaluate("typeof window.__xss") == "undefined"
