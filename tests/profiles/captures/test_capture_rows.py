"""New captures reach an open captures table without a reload: the table names where
to ask (`data-rows-url`), and `/captures/rows/?after=ID` answers the newer rows."""

import re

import pytest
from django.test import Client
from django.urls import reverse

from runs.models import Run
from tests.factories import done_capture, local_host, minutes_ago, ranked_processes
from tests.profiles.web.test_views import bulk_captures

pytestmark = pytest.mark.django_db


def rows_url(html: str) -> str:
    found = re.search(r'data-rows-url="([^"]*)"', html)
    return found.group(1).replace("&amp;", "&") if found else ""


def row_ids(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'<tr data-capture="(\d+)"', html)]


@pytest.fixture
def run_with_captures():
    run = Run.objects.create(name="r")
    (process,) = ranked_processes(run, 1)
    old = [done_capture(process=process, shares={"sync": 5}, at=minutes_ago(9)) for _ in range(2)]
    return run, process, old


def test_the_run_table_asks_for_its_runs_captures_newer_than_its_newest(
    teammate_client, run_with_captures
):
    run, process, old = run_with_captures
    url = rows_url(teammate_client.get(run.get_absolute_url()).content.decode())
    assert url == f"{reverse('profiles:capture_rows')}?run={run.pk}&tag="
    done_capture(run=Run.objects.create(name="other"), shares={"sync": 1})  # not this run's
    new = done_capture(process=process, shares={"sync": 7}, step={"host_sync": 7})
    html = teammate_client.get(url + f"&after={old[-1].pk}").content.decode()
    assert row_ids(html) == [new.pk]
    # The row's states (its step threads'), as the server renders every row; no lens.
    assert "compute 93.0%" in html and 'class="seg st-host_sync"' in html
    assert "cat-" not in html and html.count("sync 7.0%") == html.count("host_sync 7.0%")
    assert reverse("runs:run_detail", args=[run.pk]) not in html  # no run column here
    assert teammate_client.get(url + f"&after={new.pk}").content.decode().strip() == ""


def test_the_captures_list_asks_with_its_filters_on_page_one_only(
    teammate_client, run_with_captures
):
    run, _, old = run_with_captures
    html = teammate_client.get(reverse("profiles:capture_list"), {"run": run.pk}).content
    url = rows_url(html.decode())
    assert f"run={run.pk}" in url and "show_run=1" in url and "pick=1" in url
    rows = teammate_client.get(url + f"&after={old[0].pk}").content.decode()
    assert row_ids(rows) == [old[1].pk]
    assert f'name="pick" value="{old[1].pk}"' in rows  # the compare box, as on the page
    bulk_captures(50)
    page2 = teammate_client.get(reverse("profiles:capture_list"), {"page": 2}).content
    assert rows_url(page2.decode()) == ""


def test_the_host_table_keeps_its_twenty_rows(teammate_client):
    html = teammate_client.get(local_host().get_absolute_url()).content.decode()
    assert 'data-rows-limit="20"' in html
    assert f"host={local_host().pk}&show_run=1" in rows_url(html)


def test_new_rows_need_a_login_and_a_plain_id(teammate_client):
    url = reverse("profiles:capture_rows")
    assert Client().get(url, {"after": 1}).status_code == 302
    assert teammate_client.get(url, {"after": "1e3"}).status_code == 400
