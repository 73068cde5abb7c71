"""The suite's own machinery: the walk client's query-string record, the `alone` turn,
the test database copied from a template, browser waits the pages' CSP allows, and the
test sshd's cheap connections."""

import ast
import fcntl
import os
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.conf import settings
from django.db import connection

from tests.support.parallel import Alone, turn
from tests.support.procs import alive
from tests.support.sshd import ALIAS
from tests.support.walk import WalkClient


def test_no_browser_test_waits_on_a_javascript_string_the_csp_would_refuse():
    """`page.wait_for_function("...")` polls its string with eval in the page, which the
    pages' `script-src 'self'` refuses from the second poll on: the wait passed when the
    page was already there and failed CI when it was not. Wait with `expect(...)` or
    `wait_for_selector`, which Playwright runs in its own world."""
    found = []
    for path in sorted((Path(__file__).parent / "browser").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            call = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            if call and node.func.attr == "wait_for_function":
                found.append(f"{path.name}:{node.lineno}")
    assert not found, f"wait_for_function under the CSP: {found}"


@pytest.mark.sshd
def test_a_connection_to_the_test_sshd_uses_curve25519_and_a_shell_that_reads_no_bashrc(sshd):
    """Each connection cost 0.25 CPU-s before (tests/support/sshd.py says where it went;
    `python bench/suite/bench_ssh.py` measures it): OpenSSH's default post-quantum key
    exchange, and a bash that sources ~/.bashrc because sshd started it (level 1)."""
    shown = subprocess.run(
        ["ssh", "-v", "-F", str(sshd.config), "-T", "-o", "BatchMode=yes", ALIAS, "echo $SHLVL"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert shown.returncode == 0, shown.stderr
    assert "kex: algorithm: curve25519-sha256\n" in shown.stderr, shown.stderr
    assert shown.stdout.split() == ["2"]


@pytest.mark.services
def test_a_test_s3_server_whose_port_was_taken_starts_again_on_new_ports(monkeypatch):
    """Four test processes pick free ports at once: a port free when picked may be
    taken before weed binds it. That try is named, and the next starts from nothing."""
    import socket

    from tests.support import s3

    s3.require_weed()
    held: list[socket.socket] = []
    picks = s3.free_ports

    def first_taken(count: int) -> list[int]:
        ports = picks(count)
        if not held:  # the first try's master port (weed binds it first) is taken
            taker = socket.socket()
            taker.bind(("127.0.0.1", ports[-2]))
            held.append(taker)
        return ports

    monkeypatch.setattr(s3, "free_ports", first_taken)
    server = s3.SeaweedS3()
    try:
        server.start()
        client = server.client()
        client.put_object(Bucket=server.bucket, Key="k", Body=b"kept")
        assert client.get_object(Bucket=server.bucket, Key="k")["Body"].read() == b"kept"
    finally:
        server.stop()
        held[0].close()
    assert len(server.failed_tries) == 1, server.failed_tries
    assert "address already in use" in server.failed_tries[0]


@pytest.mark.services
def test_a_test_s3_server_that_never_answers_is_stopped_and_started_again(monkeypatch):
    """A try whose gateway does not answer in time is killed, named with its log, and
    followed by a try from nothing (the error of one run: "weed's S3 gateway did not
    answer in 60s", its log gone with the folder)."""
    import sys

    from tests.support import s3

    s3.require_weed()
    real_argv = s3.SeaweedS3._argv
    stuck: list[int] = []

    def argv(self):
        if stuck:  # the second try: weed, with the usual time to answer
            monkeypatch.setattr(s3, "START_TIMEOUT_S", 60)
            return real_argv(self)
        monkeypatch.setattr(s3, "START_TIMEOUT_S", 1)  # the first: alive, never answering
        stuck.append(0)
        return [sys.executable, "-c", "print('stuck before the gateway', flush=True); "
                "import time; time.sleep(600)"]  # fmt: skip

    monkeypatch.setattr(s3.SeaweedS3, "_argv", argv)
    popen = subprocess.Popen
    started: list[subprocess.Popen] = []
    monkeypatch.setattr(
        s3.subprocess, "Popen", lambda *a, **k: started.append(popen(*a, **k)) or started[-1]
    )
    server = s3.SeaweedS3()
    try:
        server.start()
        assert server.client().list_objects_v2(Bucket=server.bucket)["KeyCount"] == 0
    finally:
        server.stop()
    assert len(started) == 2 and not alive(started[0].pid)
    assert len(server.failed_tries) == 1, server.failed_tries
    assert "did not answer in 1s" in server.failed_tries[0]
    assert "stuck before the gateway" in server.failed_tries[0]


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
    item = SimpleNamespace(user_properties=[])  # the `alone` test's item
    with turn(tmp_path) as held:

        def measure():
            with Alone(held, item)():
                entered.set()
                left.wait(5)

        other = turn(tmp_path)  # another test, running
        other.__enter__()
        thread = threading.Thread(target=measure)
        thread.start()
        time.sleep(0.3)
        assert not entered.is_set()
        other.__exit__(None, None, None)  # that test ends
        assert entered.wait(5)
        left.set()
        thread.join(5)
    # bench/suite/suite_cpu.py's timeline reads when the block asked, got and gave back the turn.
    ((name, (asked, got, released)),) = item.user_properties
    assert name == "alone" and asked + 0.25 < got <= released
    # Shared again after the block: another test could take its turn beside it.
    with turn(tmp_path) as held:
        block = Alone(held)
        with block():
            pass
        with turn(tmp_path):
            assert block.entered


def test_while_a_block_waits_no_new_test_starts_and_after_it_one_does(tmp_path):
    """Asked while the other processes still have tests to run, a block waits for the
    one each is running, not until they run out: a test asking for its turn after the
    block asked waits behind it (flock alone would let it in ahead)."""
    asked, entered, leave, started = (threading.Event() for _ in range(4))

    def measure(held):
        asked.set()
        with Alone(held)():
            entered.set()
            leave.wait(5)

    def newcomer():
        with turn(tmp_path):
            started.set()

    with turn(tmp_path) as held:
        running = turn(tmp_path)  # another process's test, running
        running.__enter__()
        block = threading.Thread(target=measure, args=(held,))
        block.start()
        asked.wait(5)
        time.sleep(0.2)  # the block now waits for the running test
        later = threading.Thread(target=newcomer)
        later.start()
        time.sleep(0.3)
        assert not started.is_set() and not entered.is_set()
        running.__exit__(None, None, None)
        assert entered.wait(5)
        time.sleep(0.2)
        assert not started.is_set()  # not during the block either
        leave.set()
        block.join(5)
        assert started.wait(5)  # the gate opened with the block's end
        later.join(5)


def test_after_its_block_an_alone_test_keeps_a_shared_turn_until_it_releases_it(tmp_path):
    """The next `alone` block waits while this test's unbounded work goes on after its
    block, and no longer once it only stops what it started."""

    def exclusive_now() -> bool:
        with open(tmp_path / "turn.lock", "a") as other:  # another `alone` block asking
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            fcntl.flock(other, fcntl.LOCK_UN)
            return True

    with turn(tmp_path) as held:
        block = Alone(held)
        with block():
            assert not exclusive_now()  # its own block
        assert not exclusive_now()  # shared again: the 32-rank analyses run here
        block.release()
        assert exclusive_now()  # stopping workers and targets keeps no one waiting
    assert exclusive_now()


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


def test_a_database_still_in_use_at_the_end_is_dropped_naming_who_held_it(django_db_blocker):
    """The end of a process's run drops its database: a session a test left open (here
    a `psql` still connected) is named with its process, then ended."""
    from tests.support.database import _drop
    from tests.support.requirements import missing

    missing(None if connection.vendor == "postgresql" else "the copies are PostgreSQL's")
    name = f"test_flamedeck_left_open_{os.getpid()}"
    quote = connection.ops.quote_name
    db = settings.DATABASES["default"]
    with django_db_blocker.unblock(), connection._nodb_cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {quote(name)}")
        holder = subprocess.Popen(
            ["psql", "-h", db["HOST"], "-p", str(db["PORT"]), "-U", db["USER"], "-d", name,
             "-c", "SELECT pg_sleep(60)"],
        )  # fmt: skip
        try:
            until = time.monotonic() + 10
            while time.monotonic() < until:
                cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [name])
                if cursor.fetchone()[0]:
                    break
                time.sleep(0.05)
            with pytest.warns(UserWarning, match=f"sessions left on {name}") as said:
                _drop(cursor, name, quote)
            cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
            assert cursor.fetchone() is None
            named = str(said[0].message)
            assert f"from pid {holder.pid}: " in named and "psql" in named
            assert holder.wait(10) != 0  # its session was ended
        finally:
            holder.kill()
            holder.wait()
            cursor.execute(f"DROP DATABASE IF EXISTS {quote(name)} WITH (FORCE)")


class _Process:
    """An xdist process as the scheduler sees it: the tests sent, the shutdown told."""

    def __init__(self, name: str) -> None:
        self.name, self.shutting_down, self.ran = name, False, []
        self.gateway = SimpleNamespace(id=name)

    def send_runtest_some(self, indices) -> None:
        pass

    def shutdown(self) -> None:
        self.shutting_down = True


def _scheduler(scheduler_class, tmp_path, monkeypatch, durations=(1.0,) * 43, alone=(40, 41, 42)):
    """`scheduler_class` over four processes, a collection handed out as xdist starts."""
    collection = [f"tests/test_x.py::test_{i}" for i in range(len(durations))]
    listed = tmp_path / "alone.txt"
    listed.write_text("\n".join(collection[i] for i in sorted(alone)))
    monkeypatch.setenv("FLAMEDECK_ALONE_LIST", str(listed))
    config = SimpleNamespace(getvalue=lambda name: ["4*popen"], getoption=lambda name: 1)
    scheduler = scheduler_class(config, log=SimpleNamespace(loadsched=lambda *args: None))
    processes = [_Process(f"gw{i}") for i in range(4)]
    for process in processes:
        scheduler.add_node(process)
        scheduler.add_node_collection(process, collection)
    scheduler.schedule()
    return scheduler, processes


def _simulate(scheduler_class, tmp_path, monkeypatch, durations: list[float], alone: set[int]):
    """Run a collection through `scheduler_class` on four processes, as xdist's processes
    do: each runs its next test once it holds another after it or has been told there is
    none. Returns {process: the tests it ran, in order}."""
    scheduler, processes = _scheduler(scheduler_class, tmp_path, monkeypatch, durations, alone)
    busy_until = dict.fromkeys(processes, 0.0)
    while any(scheduler.node2pending[p] for p in processes):
        ready = [
            p
            for p in processes
            if len(scheduler.node2pending[p]) >= 2
            or (p.shutting_down and scheduler.node2pending[p])
        ]
        assert ready, "every process waits for a test that is never sent"
        process = min(ready, key=lambda p: busy_until[p])  # the first to finish its test
        index = scheduler.node2pending[process][0]
        busy_until[process] += durations[index]
        process.ran.append(index)
        scheduler.mark_test_complete(process, index)
    return {p.name: p.ran for p in processes}


def test_every_alone_test_goes_to_a_process_of_its_own_when_there_are_enough(tmp_path, monkeypatch):

    from tests.support.parallel import AloneApart

    # Ordinary tests, three long ones among the last, then three `alone` tests: one
    # process runs short tests while the others are in the long ones.
    durations = [1.0] * 37 + [20.0, 20.0, 20.0] + [30.0, 30.0, 30.0]
    alone = {40, 41, 42}
    ran = _simulate(AloneApart, tmp_path, monkeypatch, durations, alone)
    held = {name: [i for i in tests if i in alone] for name, tests in ran.items()}
    assert sorted(len(tests) for tests in held.values()) == [0, 1, 1, 1], held
    assert sorted(i for tests in ran.values() for i in tests) == list(range(43))


def test_alone_tests_before_short_ones_each_go_to_a_process_that_keeps_running_tests(
    tmp_path, monkeypatch
):
    """As `_rank` orders them: ordinary tests, three `alone` ones, then short tests
    (AFTER_ALONE). Each `alone` test goes to a process of its own, and a process holding
    one is given the short tests after them to run next, not a second `alone` one."""
    from tests.support.parallel import AloneApart

    durations = [1.0] * 30 + [20.0, 20.0, 20.0] + [1.0] * 40
    alone = {30, 31, 32}
    ran = _simulate(AloneApart, tmp_path, monkeypatch, durations, alone)
    held = {name: [i for i in tests if i in alone] for name, tests in ran.items()}
    assert sorted(len(tests) for tests in held.values()) == [0, 1, 1, 1], held
    assert sorted(i for tests in ran.values() for i in tests) == list(range(73))
    for tests in ran.values():  # each ran short tests after its `alone` one
        if set(tests) & alone:
            assert tests[-1] > 32, tests
    # The moment itself: one process holds an `alone` test and asks for more while two
    # are left, then the short ones; the others are in their last ordinary tests.
    scheduler, (first, *others) = _scheduler(
        AloneApart, tmp_path, monkeypatch, durations, alone
    )  # fmt: skip
    scheduler.pending[:] = list(range(31, 73))
    for process, queued in zip((first, *others), ([30], [27], [28], [29]), strict=True):
        scheduler.node2pending[process][:] = queued
    scheduler.check_schedule(first)
    assert scheduler.node2pending[first] == [30, 33] and not first.shutting_down
    assert scheduler.pending[:3] == [31, 32, 34]
    scheduler.check_schedule(others[0])
    assert scheduler.node2pending[others[0]] == [27, 31]


def test_a_process_holding_an_alone_test_is_told_there_is_no_more(tmp_path, monkeypatch):
    """The moment it was built for: three processes in their last ordinary tests, one
    holding an `alone` test asks for more, and two `alone` tests are left."""
    from xdist.scheduler import LoadScheduling

    from tests.support.parallel import AloneApart

    def ask(scheduler_class):
        scheduler, (first, *others) = _scheduler(scheduler_class, tmp_path, monkeypatch)
        scheduler.pending[:] = [41, 42]
        for process, held in zip((first, *others), ([40], [37], [38], [39]), strict=True):
            scheduler.node2pending[process][:] = held
        scheduler.check_schedule(first)
        return scheduler, first, others

    # xdist's own: the 32-rank window queued behind the 8-rank one on one process.
    scheduler, first, _ = ask(LoadScheduling)
    assert scheduler.node2pending[first] == [40, 41] and not first.shutting_down
    # Here: told there is no more, so it runs the one it holds; the next process takes 41.
    scheduler, first, (second, *_) = ask(AloneApart)
    assert scheduler.node2pending[first] == [40] and first.shutting_down
    scheduler.check_schedule(second)
    assert scheduler.node2pending[second] == [37, 41] and scheduler.pending == [42]


def test_more_alone_tests_than_processes_still_all_run(tmp_path, monkeypatch):
    from tests.support.parallel import AloneApart

    durations = [1.0] * 10 + [5.0] * 6
    ran = _simulate(AloneApart, tmp_path, monkeypatch, durations, set(range(10, 16)))
    assert sorted(i for tests in ran.values() for i in tests) == list(range(16))
