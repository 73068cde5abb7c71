"""The README's "Register ranks from your launcher" block, run for real: two ranks
started as separate Python processes register against a live server."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from runs.models import Run
from runs.tokens import api_token_create
from tests.support.procs import sleepers

ROOT = Path(__file__).resolve().parents[2]
README, JOBS_PAGE = ROOT / "README.md", ROOT / "docs" / "jobs.md"

pytestmark = pytest.mark.django_db(transaction=True)


def snippet(page: Path = README) -> str:
    text = page.read_text()
    block = re.search(
        r"<!-- register-snippet:start -->\n```python\n(.*?)```\n<!-- register-snippet:end -->",
        text,
        re.S,
    )
    assert block, f"{page.name} lost its register snippet markers"
    return block.group(1)


def test_the_docs_show_the_same_snippet_as_the_readme():
    assert snippet(JOBS_PAGE) == snippet(README)


def _rank(code: str, env: dict[str, str]) -> subprocess.Popen:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FLAMEDECK")}
    return subprocess.Popen(
        [sys.executable, "-c", code + "\nimport time; time.sleep(30)\n"],
        env={**clean, **env},
        stdout=subprocess.PIPE,
        text=True,
    )


def _first_line(proc: subprocess.Popen) -> str:
    line = proc.stdout.readline()
    proc.kill()
    proc.wait()
    return line


def test_the_readme_snippet_registers_every_rank_into_one_run(live_server, owner):
    token = api_token_create(user=owner)[1]
    env = {"FLAMEDECK_URL": live_server.url, "FLAMEDECK_TOKEN": token}
    env |= {"FLAMEDECK_HOST": "local", "FLAMEDECK_RUN": "snippet-job"}
    ranks = [_rank(snippet(), {**env, "RANK": str(r), "LOCAL_RANK": str(r)}) for r in range(2)]
    pids = sorted(p.pid for p in ranks)
    lines = [_first_line(p) for p in ranks]
    run = Run.objects.get(name="snippet-job")
    assert all(line.startswith("flamedeck: snippet-job rank rank-") for line in lines), lines
    # Absolute, so the line in a training log can be opened as it is.
    assert all(f" {live_server.url}{run.get_absolute_url()}" in line for line in lines), lines
    assert sorted(run.processes.values_list("pid", flat=True)) == pids
    assert sorted(run.processes.values_list("role", flat=True)) == ["rank-0", "rank-1"]
    assert run.started_at is not None


def test_the_snippet_reports_an_unknown_host_and_lets_training_go_on(live_server, owner):
    token = api_token_create(user=owner)[1]
    env = {"FLAMEDECK_URL": live_server.url, "FLAMEDECK_TOKEN": token}
    rank = _rank(snippet(), {**env, "FLAMEDECK_HOST": "gpu-node-404", "RANK": "0"})
    line = _first_line(rank)
    assert line.startswith("flamedeck: not registered: 400") and "gpu-node-404" in line
    assert not Run.objects.exists() or not Run.objects.filter(processes__isnull=False).exists()


def test_the_snippet_does_nothing_without_a_url_and_token():
    done = subprocess.run(
        [sys.executable, "-c", snippet() + "\nprint('training')\n"],
        env={k: v for k, v in os.environ.items() if not k.startswith("FLAMEDECK")},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0 and done.stdout == "training\n"


def test_without_a_run_name_every_launch_of_the_job_shares_one_run(live_server, owner):
    token = api_token_create(user=owner)[1]
    env = {"FLAMEDECK_URL": live_server.url, "FLAMEDECK_TOKEN": token, "FLAMEDECK_HOST": "local"}
    launcher = (
        "import subprocess, sys\n"
        f"code = {snippet()!r}\n"
        "ranks = [subprocess.Popen([sys.executable, '-c', code], env={**__import__('os').environ,"
        " 'RANK': str(r)}) for r in range(2)]\n"
        "codes = [p.wait() for p in ranks]\n"
        "print('launcher', __import__('os').getpid())\n"
        "sys.exit(max(codes))\n"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("FLAMEDECK", "TORCHELASTIC"))}
    done = subprocess.run(
        [sys.executable, "-c", launcher], env={**clean, **env}, capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    run = Run.objects.get()
    # The working folder and the script (here `-c`, so "job"): the same on every node.
    assert run.name == f"{Path.cwd().name}-job"
    assert sorted(run.processes.values_list("role", flat=True)) == ["rank-0", "rank-1"]
    # A relaunch (new PIDs, the old ones gone) joins the same run as its second launch
    # and retires the processes it replaces.
    again = subprocess.run(
        [sys.executable, "-c", launcher], env={**clean, **env}, capture_output=True, timeout=60
    )
    assert again.returncode == 0, again.stderr
    assert Run.objects.get() == run
    current = run.processes.filter(replaced_at__isnull=True)
    assert sorted(current.values_list("role", "launch__number")) == [("rank-0", 2), ("rank-1", 2)]
    assert run.processes.filter(replaced_at__isnull=False, launch__number=1).count() == 2


@pytest.fixture
def sixteen_ranks():
    with sleepers(16) as pids:
        yield pids


def test_sixteen_ranks_registering_at_the_same_instant_share_one_run(
    live_server, owner, sixteen_ranks
):
    import json
    import threading
    import urllib.request

    token = api_token_create(user=owner)[1]
    barrier, codes = threading.Barrier(16), []

    def register(rank: int) -> None:
        pid = sixteen_ranks[rank]
        body = {"run": "burst", "host": "local", "pid": pid, "role": f"rank-{rank}"}
        request = urllib.request.Request(  # noqa: S310 — the live server's http:// URL
            live_server.url + "/api/register/",
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
        )
        barrier.wait()
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            codes.append(response.status)

    threads = [threading.Thread(target=register, args=(r,)) for r in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert codes == [201] * 16
    run = Run.objects.get(name="burst")
    assert run.processes.count() == 16
    assert run.processes.filter(alive=True, checked_at__isnull=False).count() == 16
