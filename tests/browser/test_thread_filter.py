"""The capture page's thread filter: tables and flamegraph follow it, the URL keeps
it, and it still works once the raw samples are pruned (stats come from the stored
per-thread tables)."""

from urllib.parse import parse_qs, urlparse

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from playwright.sync_api import expect

from profiles.captures import services
from profiles.jobs import services as jobs

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RAW = (
    "thread (11): MainThread;main (train.py:10);step (train.py:20);"
    "cuLaunchKernel (libcuda.so.1) 70\n"
    "thread (12): loader;load (data.py:5);decode_jpeg (data.py:9) 30\n"
)


def test_a_thread_filter_narrows_every_table_survives_a_reload_and_raw_pruning(open_tab, teammate):
    capture = services.capture_import(
        user=teammate, file=SimpleUploadedFile("two.txt", RAW.encode()), run=None
    )
    page = open_tab(teammate).goto(capture.get_absolute_url())
    page.wait_for_selector("#flamegraph[data-ready='1']")
    expect(page.locator("#top-self")).to_contain_text("cuLaunchKernel")

    page.click("#thread-pick summary")
    page.locator("#thread-options input[value='12']").check()
    expect(page.locator("#thread-summary")).to_have_text("1 selected")
    expect(page.locator("#top-self")).not_to_contain_text("cuLaunchKernel")
    expect(page.locator("#top-self")).to_contain_text("decode_jpeg")
    expect(page.locator("#threads")).not_to_contain_text("MainThread")
    expect(page.locator('#flamegraph g[name^="cuLaunchKernel"]')).to_have_count(0)
    assert parse_qs(urlparse(page.url).query)["thread"] == ["12"]

    jobs.raw_prune(budget_bytes=0)
    page.reload()
    page.wait_for_selector("#flamegraph[data-ready='1']")
    expect(page.locator("#thread-summary")).to_have_text("1 selected")
    expect(page.locator("#top-self")).to_contain_text("decode_jpeg")
    expect(page.locator("#top-self")).not_to_contain_text("cuLaunchKernel")
    expect(page.locator("#thread-note")).to_be_hidden()
