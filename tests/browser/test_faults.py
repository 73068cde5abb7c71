"""What the pages say when things fail: a broker that is down, a host not reached."""

import pytest
from playwright.sync_api import expect

from profiles.models import Capture
from runs.models import Host, Run
from tests.support.brokers import broker_url
from tests.support.sshd import free_port

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_capture_buttons_say_the_queue_is_unavailable_when_the_broker_is_down(
    open_tab, owner, running_pid
):
    run = Run.objects.create(name="job", status="running")
    # A process that runs, so "Capture all" has something to start.
    run.processes.create(host=Host.objects.get(name="local"), pid=running_pid, role="rank-0")
    tab = open_tab(owner)
    page = tab.goto(f"/runs/{run.pk}/")
    with broker_url(f"redis://127.0.0.1:{free_port()}/0"):
        page.locator("#capture-all").click()  # "Capture all" asks first, in a dialog
        page.locator("#capture-all-start").click()
        expect(page.locator("#capture-all-error")).to_contain_text(
            "Could not start: queue unavailable: the broker at redis://127.0.0.1:"
        )
        page.locator("#capture-all-dialog button[value=cancel]").click()
        with page.expect_event("dialog") as dialog:
            page.locator(".capture-launch .capture-btn").first.click()
        assert dialog.value.message.startswith("Could not start the capture: queue unavailable")
    tab.errors = [e for e in tab.errors if "queue unavailable" not in e and "503" not in e]
    assert set(Capture.objects.values_list("status", "error_cause")) == {
        ("failed", "queue_unavailable")
    }


def test_a_host_check_that_cannot_reach_the_host_never_says_py_spy_is_missing(open_tab, owner):
    host = Host.objects.create(name="down", transport="ssh", address="127.0.0.1", port=free_port())
    page = open_tab(owner).goto(f"/hosts/{host.pk}/")
    page.locator("#check-button").click()
    result = page.locator("#check-result")
    expect(result).to_contain_text("Error (unreachable): cannot reach the host")
    expect(result).not_to_contain_text("not found")
    # py-spy, native unwinding and ptrace: none was looked at
    expect(result.locator("td", has_text="not checked")).to_have_count(3)
    assert result.inner_text().count("cannot reach the host") == 1
    result.locator("details summary").click()
    expect(result.locator("details pre")).to_contain_text("Connection refused")


def test_the_live_capture_rows_keep_saying_that_a_retry_waits(open_tab, owner):
    from profiles.captures import lifecycle as states
    from runs.remote import RemoteError

    run = Run.objects.create(name="job", status="running")
    host = Host.objects.create(name="down", transport="ssh", address="127.0.0.1", port=free_port())
    capture = Capture.objects.create(host=host, pid=4242, run=run, status="queued", attempts=1)
    error = RemoteError("unreachable", detail="ssh: connect to host down port 22: refused")
    states.capture_retry_noted(capture_id=capture.pk, error=error, attempt=2, of=4, countdown=60)
    line = "retrying, attempt 2 of 4 in 60 s: host unreachable"
    page = open_tab(owner).goto(f"/runs/{run.pk}/")
    row = page.locator(f'tr[data-capture="{capture.pk}"]')
    # The rows poll the API from load on and redraw their status cell from what it says:
    # once one more answer has come, the cell has been redrawn at least once.
    with page.expect_response(f"**/api/captures/{capture.pk}/"):
        pass
    expect(row.locator("[data-cell=status]")).to_contain_text(line)
    Capture.objects.filter(pk=capture.pk).update(attempts=4)
    states.capture_fail_retried(capture_id=capture.pk, error=error, attempts=4)
    expect(row.locator("[data-cell=status]")).to_contain_text("Failed", timeout=5000)
    expect(row.locator("[data-cell=status]")).not_to_contain_text("retrying")
    expect(row).to_contain_text("failed after 4 attempts: cannot reach the host")
