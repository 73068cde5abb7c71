"""The API reference in Chromium: Swagger UI draws every operation of the schema from
files of this origin, opens one and runs it with the session, and the
Content-Security-Policy (no inline script or style) reports no violation throughout.
The JSON-on-a-page view of an endpoint holds the policy too."""

import pytest

from runs.models import Run
from tests.browser.test_csp import LISTEN, _collect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _watch(page) -> list[str]:
    console: list[str] = []
    page.on("console", lambda m: "Content Security Policy" in m.text and console.append(m.text))
    page.add_init_script(LISTEN)
    return console


def test_the_reference_renders_every_operation_without_a_csp_violation(open_tab, teammate):
    Run.objects.create(name="job-in-the-reference")
    tab = open_tab(teammate)
    console = _watch(tab.page)
    page = tab.goto("/api/docs/")
    page.wait_for_selector(".swagger-ui .opblock", timeout=20_000)
    operations = page.locator(".swagger-ui .opblock").count()
    assert operations >= 27, operations
    assert page.locator(".swagger-ui .auth-wrapper .authorize").count() == 1  # the token scheme
    # Open GET /api/runs/, try it out, execute: the answer comes back with the session.
    block = page.locator("#operations-runs-runs_list")
    block.locator(".opblock-summary").click()
    block.locator("button.try-out__btn").click()
    block.locator("button.execute").click()
    page.wait_for_selector("#operations-runs-runs_list .responses-table.live-responses-table")
    assert "job-in-the-reference" in block.locator(".live-responses-table").inner_text()
    violations = _collect(page) + console
    assert not violations, violations


def test_an_endpoint_opened_in_the_browser_holds_the_policy(open_tab, teammate):
    tab = open_tab(teammate)
    console = _watch(tab.page)
    page = tab.goto("/api/runs/")
    assert page.locator("pre.api-json").count() == 1
    assert not _collect(page) + console
