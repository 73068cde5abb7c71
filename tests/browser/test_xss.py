"""Frame names come from the profiled program: a crafted capture whose frames carry
<script> and <img onerror> must render as text in the flamegraph labels, its
tooltip, the tables, search and comments, and never run."""

import pytest
from playwright.sync_api import expect

from profiles.models import Capture
from tests.profiles.web.test_views import IMG, RAW, XSS
from tests.test_xss_corpus import hostile_world  # noqa: F401 - the fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_crafted_frame_names_stay_text_everywhere(open_tab, owner, tmp_path, celery_worker_process):
    """The upload is parsed by a real worker; the page reloads itself once done."""
    raw = tmp_path / "evil.txt"
    # wide evil frames, so the flamegraph draws their labels
    raw.write_text(RAW.replace(" 10\n", " 400\n").replace(" 5\n", " 300\n"))
    page = open_tab(owner).goto("/captures/import/")
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
    # A table row opens the frame's sandwich; its name stays text there too.
    page.locator("#top-self .sandwich-link", has_text="<script>").click()
    expect(page.locator("#sandwich-frame")).to_have_text(XSS + " (evil.py:1)")
    expect(page.locator("#sandwich[data-ready='1']")).to_have_count(1)
    page.locator('#flamegraph g[name^="<script>"]').first.click()
    expect(page.locator("#fg-focus")).to_contain_text(XSS)

    page.fill(".commentform textarea", f"see {IMG} and {XSS}")
    page.check("#pin-frame")
    page.click(".commentform button[type=submit]")
    expect(page.locator(".comments .pin")).to_contain_text("<script>")
    assert (
        page.locator(
            ".comments img, .comments script, #flamegraph img, #top-self img, #sandwich img"
        ).count()
        == 0
    )
    assert page.evaluate("typeof window.__xss") == "undefined"


def test_hostile_text_in_hosts_roles_change_logs_and_command_lines_stays_text(
    open_tab,
    hostile_world,  # noqa: F811
    teammate,
    host_admin,
):
    """Pages that draw user and host text with JS: the host's processes (command
    lines, users), its change log, the run's process roles (RANK labels), the group
    page, the compare page. Nothing runs, no element is injected."""
    for user in (teammate, host_admin):
        tab = open_tab(user)
        for url in hostile_world["pages"]:
            if url.startswith(("/api/", "/admin/")) or "/edit/" in url:
                continue
            page = tab.goto(url)
            page.wait_for_load_state("networkidle")
            assert page.evaluate("typeof window.__xss") == "undefined", url
            injected = "main img[src=x], main svg[onload], main script:not([src]):not([type])"
            assert page.locator(injected).count() == 0, url
    host_page = open_tab(host_admin).goto(hostile_world["host"])
    expect(host_page.locator("#process-list")).to_contain_text(f"python {XSS}")
    expect(host_page.locator("#host-changes")).to_contain_text(IMG)


def test_hostile_frame_names_in_findings_states_and_the_job_report_stay_text(
    open_tab,
    hostile_world,  # noqa: F811
    teammate,
):
    """The evidence the analysis stored, with `<script>`, `<img onerror>`, `<module>`
    and C++ template frames: drawn as text in the findings, the states' call sites, the
    threads, the straggler, the classes and the ranks, tooltips (titles) included."""
    from tests.test_xss_corpus import FRAMES, MODULE, TEMPLATE

    tab = open_tab(teammate)
    page = tab.goto(hostile_world["capture"].get_absolute_url())
    findings = page.locator("#findings")
    expect(findings).to_contain_text(f"title {XSS}")
    expect(findings.locator(".advice code")).to_have_text([IMG, MODULE, TEMPLATE])
    expect(findings.locator(".framename")).to_have_text(FRAMES)
    assert findings.locator(".framename").first.get_attribute("title") == FRAMES[0]
    caller = page.locator("#states .caller-link").first
    expect(caller).to_have_text(FRAMES[0])
    assert caller.get_attribute("title").startswith(FRAMES[0])
    expect(page.locator("#threads")).to_contain_text(XSS)
    expect(page.locator("#states")).to_contain_text(XSS)  # thread names beside states
    group = hostile_world["capture"].run.capture_groups.get()
    page = tab.goto(group.get_absolute_url())
    report = page.locator("#job-report[data-ready='1']")
    expect(report.locator("#straggler .explanation code")).to_have_text(FRAMES)
    expect(report.locator("#job-classes")).to_contain_text(f"ranks {XSS}: {TEMPLATE}")
    expect(report.locator("#job-ranks")).to_contain_text(f"RANK={XSS}")
    expect(report.locator(".findings .framename")).to_have_text(FRAMES)
    link = report.locator("#straggler a.sandwich-link").first
    assert link.get_attribute("title").startswith(f"callers and callees of {FRAMES[0]}")
    for url in (hostile_world["capture"].get_absolute_url(), group.get_absolute_url()):
        page = tab.goto(url)
        page.wait_for_load_state("networkidle")
        injected = (
            "main img[src=x], main svg[onload], main script:not([src]):not([type]), main module"
        )
        assert page.locator(injected).count() == 0, url
        assert page.evaluate("typeof window.__xss") == "undefined", url
