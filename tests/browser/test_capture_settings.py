"""The capture dialogs in headless Chromium, built from the settings schema the page
is served (runs/capture_settings.py): each setting's help as a tooltip that keyboards
and screen readers get, the pair py-spy refuses caught before a request, and the
capture buttons of a run following what "Capture all" remembered on it."""

import pytest
from playwright.sync_api import expect

from profiles.captures import enqueue
from profiles.models import Capture
from runs.capture_settings import BY_NAME, CONFLICTS
from runs.models import RunProcess
from tests import factories

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
TIPPED = ("idle", "gil", "nonblocking", "subprocesses")


@pytest.fixture
def no_enqueue(monkeypatch):
    monkeypatch.setattr(enqueue, "group_enqueue", lambda *, group: None)
    monkeypatch.setattr(enqueue, "capture_enqueue", lambda *, capture: None)


@pytest.fixture
def live_run(running_pid):
    """A run whose one process is alive on the local host."""
    run = factories.run("settings-run")
    RunProcess.objects.create(run=run, host=factories.local_host(), pid=running_pid, role="r0")
    return run


def check_tip(page, scope, name: str) -> None:
    """The setting's input is described by a tooltip holding the schema's help, shown
    when the keyboard reaches it and hidden again by Escape."""
    box = scope.locator(f"input[name={name}]")
    tip = page.locator(f"#{box.get_attribute('aria-describedby')}")
    expect(tip).to_have_attribute("role", "tooltip")
    expect(tip).to_have_text(BY_NAME[name].help)
    expect(box).to_have_accessible_description(BY_NAME[name].help)
    expect(tip).to_be_hidden()
    box.focus()  # then away and back with the keyboard, as a keyboard user arrives
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Tab")
    expect(box).to_be_focused()
    expect(tip).to_be_visible()
    page.keyboard.press("Escape")
    expect(tip).to_be_hidden()


def open_panel(tab, run):
    """The run's page with the first capture button's advanced panel open."""
    page = tab.goto(run.get_absolute_url())
    # The page asks the hosts which processes still run and rewrites those cells when
    # the answer comes: keyboard checks start after it (under load, a focus test once
    # found its input unfocused, with the answer still on its way).
    expect(page.locator("#processes [data-cell=alive]").first).to_have_text(
        "running", timeout=20_000
    )
    launcher = page.locator("#processes .capture-launch").first
    launcher.locator(".capture-more").click()
    return page, launcher.locator(".capture-panel")


def test_every_option_of_both_dialogs_explains_itself_to_mouse_keyboard_and_reader(
    open_tab, owner, live_run, no_enqueue
):
    page, panel = open_panel(open_tab(owner), live_run)
    for name in TIPPED:
        check_tip(page, panel, name)
    panel.locator("label[data-setting=gil]").hover()
    expect(panel.locator("label[data-setting=gil] [role=tooltip]")).to_be_visible()
    page.click("#capture-all")
    dialog = page.locator("#capture-all-dialog")
    for name in TIPPED:
        check_tip(page, dialog, name)
    expect(dialog).to_be_visible()  # Escape hid a tip, not the dialog
    # A whole-job capture's own default, from the schema: idle on.
    expect(dialog.locator("input[name=idle]")).to_be_checked()
    expect(dialog.locator("input[name=dump_locals]")).to_have_count(0)  # a record


def test_the_pair_py_spy_refuses_is_caught_in_the_dialog_before_any_request(
    open_tab, owner, live_run, no_enqueue
):
    page, panel = open_panel(open_tab(owner), live_run)
    start = panel.get_by_role("button", name="Start capture")
    expect(panel.locator("input[name=native]")).to_be_checked()
    panel.locator("input[name=nonblocking]").check()
    expect(panel.locator(".setting-conflict")).to_contain_text(CONFLICTS[0].message)
    expect(start).to_be_disabled()
    panel.locator("input[name=native]").uncheck()
    expect(start).to_be_enabled()
    expect(panel.locator(".setting-conflict")).to_be_hidden()
    # A dump takes no duration: it is greyed out, and its own --locals is not.
    panel.locator("input[value=dump]").check()
    expect(panel.locator("input[name=duration]")).to_be_disabled()
    expect(panel.locator("input[name=dump_locals]")).to_be_enabled()
    assert not Capture.objects.exists()


def test_a_runs_capture_buttons_follow_what_capture_all_remembered(
    open_tab, owner, live_run, no_enqueue
):
    live_run.capture_settings = {"duration": 7, "rate": 33, "native": False, "idle": True}
    live_run.save()
    page = open_tab(owner).goto(live_run.get_absolute_url())
    button = page.locator("#processes .capture-btn").first
    expect(button).to_have_text("Capture 7 s")
    expect(page.locator("[data-capture-summary]")).to_have_text("7 s at 33 Hz, threads, idle")
    button.click()
    expect(page.locator("#capture-dock")).to_contain_text("queued")
    capture = Capture.objects.get()
    assert (capture.duration, capture.rate, capture.native, capture.idle) == (7, 33, False, True)
    # "Capture all" with new settings: they are remembered, and the buttons follow them
    # at once (the capture itself is refused: py-spy is already on the process).
    page.click("#capture-all")
    dialog = page.locator("#capture-all-dialog")
    expect(dialog.locator("input[name=duration]")).to_have_value("7")
    dialog.locator("input[name=duration]").fill("9")
    dialog.locator("input[name=gil]").check()
    dialog.locator("#capture-all-start").click()
    expect(dialog.locator("#capture-all-error")).to_contain_text("already")
    dialog.locator("button[value=cancel]").click()
    expect(button).to_have_text("Capture 9 s")
    # A whole-job capture samples DataLoader workers by default (--subprocesses).
    expect(page.locator("[data-capture-summary]")).to_have_text(
        "9 s at 33 Hz, threads, idle, gil, subprocesses"
    )
    live_run.refresh_from_db()
    assert live_run.capture_settings["duration"] == 9 and live_run.capture_settings["gil"]
