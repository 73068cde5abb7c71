"""The suite's own machinery: the walk client's query-string record, the `alone` turn,
the test database copied from a template."""

import os
import threading
import time

import pytest
from django.conf import settings
from django.db import connection

from tests.support.parallel import Alone, turn
from tests.support.walk import WalkClient


@pytest.mark.django_db
def test_the_walk_client_tells_a_page_that_reads_its_query_from_one_that_does_not(teammate):
    client = WalkClient()
    client.force_login(teammate)
    assert client.get("/captures/?page=2").status_code == 200
    assert client.query_read  # the list pages through ?page=
    assert client.get("/hosts/").status_code == 200
    assert not client.query_read  # the host list reads no query
    assert client.get("/api/hosts/").status_code == 200
    assert client.query_read  # DRF reads ?format= on every request


def test_an_alone_block_waits_for_every_other_test_and_shares_the_turn_again(tmp_path):
    entered, left = threading.Event(), threading.Event()
    with turn(tmp_path, exclusive=False) as held:

        def measure():
            with Alone(held)():
                entered.set()
                left.wait(5)

        other = turn(tmp_path, exclusive=False)  # another test, running
        other.__enter__()
        thread = threading.Thread(target=measure)
        thread.start()
        time.sleep(0.3)
        assert not entered.is_set()
        other.__exit__(None, None, None)  # that test ends
        assert entered.wait(5)
        left.set()
        thread.join(5)
    # Shared again after the block: another test could take its turn beside it.
    with turn(tmp_path, exclusive=False) as held:
        block = Alone(held)
        with block():
            pass
        with turn(tmp_path, exclusive=False):
            assert block.entered


@pytest.mark.django_db
def test_under_xdist_on_postgresql_each_process_has_its_own_copy_of_the_template(request):
    from tests.support.database import _run_folder, _template_name

    copied = request.config.pluginmanager.has_plugin("flamedeck-template-database")
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    assert copied == bool(worker and connection.vendor == "postgresql")
    if not copied:
        return  # pytest-django's own setup migrated this database
    own = settings.DATABASES["default"]["NAME"]
    assert own.endswith(f"_{worker}")
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_database()")
        assert cursor.fetchone()[0] == own
        template = _template_name(_run_folder(request.config))
        cursor.execute("SELECT datname FROM pg_database WHERE datname = %s", [template])
        assert cursor.fetchone() is not None
