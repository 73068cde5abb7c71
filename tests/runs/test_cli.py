"""The head node's command line (`flamedeck`, runs/cli.py) against a live server, a real
worker and real ranks sampled by real py-spy: a hung job's dump exits 3 and says which
rank stands where, a healthy job's capture prints its report's findings and exits 0;
and the environment, the run's name and the server's refusals each have their exit code."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from profiles.models import CaptureGroup
from runs import cli
from runs.models import Host, Run, RunProcess
from runs.tokens import api_token_create
from tests.support.hung_ranks import Rank

ROOT = Path(__file__).resolve().parents[2]


def flamedeck(*args: str, env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess:
    """`python -m runs.cli ARGS` as a head node runs it: only the FLAMEDECK_ variables given."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("FLAMEDECK", "DJANGO"))}
    return subprocess.run(
        [sys.executable, "-m", "runs.cli", *args],
        env={**clean, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _job(name: str, kinds: list[str]) -> tuple[Run, list[Rank]]:
    ranks = [Rank(kind) for kind in kinds]
    run = Run.objects.create(name=name, status="running")
    local = Host.objects.get(name="local")
    for index, rank in enumerate(ranks):
        RunProcess.objects.create(run=run, host=local, pid=rank.pid, role=f"rank-{index}")
    return run, ranks


@pytest.fixture
def head_node(live_server, owner) -> dict[str, str]:
    """The environment a head node has: the server's URL and an operator's token."""
    return {"FLAMEDECK_URL": live_server.url, "FLAMEDECK_TOKEN": api_token_create(user=owner)[1]}


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_dump_all_of_a_hung_job_exits_3_and_says_which_rank_stands_where(
    head_node, celery_worker_process
):
    run, ranks = _job("hung-llama", ["waiter", "waiter", "locked", "waiter"])
    try:
        done = flamedeck("dump-all", "hung-llama", "--repeat", "2", "--interval", "0.5",
                         env=head_node)  # fmt: skip
    finally:
        for rank in ranks:
            rank.stop()
    assert done.returncode == cli.EXIT_STUCK, done.stderr
    group = CaptureGroup.objects.get(run=run)
    assert group.stacks["verdict"]["kind"] == "stuck"
    assert f"/groups/{group.pk}/" in done.stderr and "4 ranks" in done.stderr
    assert "verdict: stuck: rank-2 stands in `wait_for_lock" in done.stdout
    assert group.stacks["verdict"]["explanation"] in done.stdout
    # Each class of ranks on a line of its own: the three waiters, and rank-2.
    assert "  rank-0, rank-1, rank-3: all_reduce_wait" in done.stdout, done.stdout
    assert "  rank-2: wait_for_lock" in done.stdout, done.stdout


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_capture_all_of_a_healthy_job_prints_its_findings_and_exits_0(
    head_node, celery_worker_process
):
    run, ranks = _job("healthy-llama", ["stepping", "stepping"])
    try:
        done = flamedeck("capture-all", "healthy-llama", "--duration", "2", "--rate", "20",
                         env=head_node)  # fmt: skip
    finally:
        for rank in ranks:
            rank.stop()
    assert done.returncode == cli.EXIT_OK, done.stderr
    group = CaptureGroup.objects.get(run=run)
    assert group.report_status == "stored" and group.kind == "record"
    rank_0 = group.captures.get(process__role="rank-0")
    assert (rank_0.duration, rank_0.rate) == (2, 20)
    findings = group.job_report["findings"]
    assert findings, "a 2 s capture at 20 Hz has too few samples: at least that finding"
    assert f"findings: {len(findings)}" in done.stdout
    for finding in findings:
        assert f"[{finding['severity']}] {finding['rule']}: {finding['title']}" in done.stdout
    assert not any(f["rule"] == "stuck" for f in findings)


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_wait_past_its_timeout_exits_5_and_the_capture_goes_on(head_node, celery_worker_process):
    run, ranks = _job("slow-llama", ["stepping"])
    try:
        done = flamedeck("capture-all", "slow-llama", "--duration", "4", "--timeout", "1",
                         env=head_node)  # fmt: skip
        group = CaptureGroup.objects.get(run=run)
        assert group.report_status == "pending"
    finally:
        for rank in ranks:
            rank.stop()
    assert done.returncode == cli.EXIT_NO_ANSWER, done.stderr
    assert "no answer after 1 s" in done.stderr and "goes on on the server" in done.stderr
    assert done.stdout == ""


@pytest.mark.django_db(transaction=True)
def test_an_unknown_run_and_a_refused_capture_exit_4_with_the_servers_reason(head_node):
    Run.objects.create(name="empty-run")
    unknown = flamedeck("dump-all", "no-such-run", env=head_node)
    assert unknown.returncode == cli.EXIT_REFUSED
    assert "no run named 'no-such-run' among the newest 1 runs" in unknown.stderr
    empty = flamedeck("capture-all", "empty-run", env=head_node)
    assert empty.returncode == cli.EXIT_REFUSED
    # The server's refusal (its status and reason) in one line, whatever its status.
    assert re.search(r"POST /api/runs/\d+/capture/: 4\d\d .*no processes", empty.stderr)
    assert not CaptureGroup.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_wrong_token_or_a_server_that_is_not_there_exits_4(head_node):
    wrong = flamedeck("dump-all", "x", env={**head_node, "FLAMEDECK_TOKEN": "not-a-key"})
    assert wrong.returncode == cli.EXIT_REFUSED
    assert "GET /api/runs/: 401" in wrong.stderr or "GET /api/runs/: 403" in wrong.stderr
    from tests.support.sshd import free_port

    gone = {**head_node, "FLAMEDECK_URL": f"http://127.0.0.1:{free_port()}"}
    refused = flamedeck("dump-all", "x", env=gone)
    assert refused.returncode == cli.EXIT_REFUSED and "cannot be reached" in refused.stderr


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({}, "set FLAMEDECK_URL and FLAMEDECK_TOKEN"),
        ({"FLAMEDECK_URL": "http://head:8000"}, "set FLAMEDECK_URL and FLAMEDECK_TOKEN"),
        ({"FLAMEDECK_URL": "head:8000", "FLAMEDECK_TOKEN": "k"}, "needs http:// or https://"),
    ],
)
def test_without_a_usable_url_and_token_it_exits_2_saying_what_to_set(env, says):
    done = flamedeck("capture-all", "llama", env=env)
    assert done.returncode == cli.EXIT_USAGE and says in done.stderr
    assert flamedeck("capture-all", env={}).returncode == cli.EXIT_USAGE  # no RUN


def test_it_imports_only_the_standard_library():
    code = (
        "import sys; before = set(sys.modules); import runs.cli; "
        "new = {m.split('.')[0] for m in set(sys.modules) - before}; "
        "print(sorted(new - set(sys.stdlib_module_names)))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "['runs']", done.stdout


def test_frame_names_and_errors_reach_the_terminal_with_control_characters_escaped():
    evil = "wipe\x1b[2J\x1b]0;pwned\x07 (train.py:9)"
    dump = {
        "kind": "dump",
        "failed_hosts": [],
        "stacks": {
            "verdict": {"kind": "stuck", "explanation": f"rank-2 stands in `{evil}`"},
            "classes": [
                {"ranks": ["rank-2"], "user_frame": evil, "state": "idle", "moving": False}
            ],
            "failed": [{"rank": "rank-3\r", "cause": "exited", "error": "gone\x1b[1A"}],
        },
    }
    lines = "\n".join(cli.dump_lines(dump))
    assert "\x1b" not in lines and "\x07" not in lines and "\r" not in lines
    assert "wipe\\x1b[2J\\x1b]0;pwned\\x07 (train.py:9)" in lines
    assert cli.is_stuck(dump)
    finding = {"rule": "stuck", "severity": "high", "title": evil, "advice": "a\x1bb"}
    report = "\n".join(cli.report_lines({"kind": "record", "findings": [finding]}))
    assert "\x1b" not in report and "[high] stuck: wipe\\x1b[2J" in report
    assert cli.is_stuck({"kind": "record", "findings": [finding]})
    assert not cli.is_stuck({"kind": "record", "findings": [], "straggler": {"name": "rank-1"}})
