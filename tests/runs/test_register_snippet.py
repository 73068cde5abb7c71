"""The README's "Register ranks from your launcher" block, run for real: two ranks
started as separate Python processes register against a live server."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from runs.models import Run, RunProcess
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


# What each launcher puts in a rank's environment (Lightning's, Open MPI's and MPICH's as
# seen on real runs here: docs/jobs.md), and the role and launch key the rank sends.
LAUNCHERS = {
    "torchrun": ({"RANK": "5", "LOCAL_RANK": "1", "TORCHELASTIC_RUN_ID": "j1"}, "rank-5", "j1"),
    "lightning-first": ({}, "rank-0", ""),  # the process Trainer(...) runs in
    "lightning-spawned": (
        {"LOCAL_RANK": "3", "NODE_RANK": "0", "WORLD_SIZE": "4", "MASTER_PORT": "29500"},
        "rank-3",
        "",
    ),
    "lightning-node-1": (
        {"LOCAL_RANK": "2", "NODE_RANK": "1", "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"},
        "rank-10",
        "",
    ),
    "srun": (
        {"SLURM_PROCID": "13", "SLURM_LOCALID": "5", "SLURM_NTASKS": "16", "SLURM_JOB_ID": "4242",
         "SLURM_STEP_ID": "0"},
        "rank-13",
        "slurm-4242.0.0",
    ),
    "openmpi": (
        {"OMPI_COMM_WORLD_RANK": "6", "OMPI_COMM_WORLD_SIZE": "8",
         "OMPI_COMM_WORLD_LOCAL_RANK": "2", "PMIX_RANK": "6", "PMIX_NAMESPACE": "1135738881"},
        "rank-6",
        "1135738881",
    ),
    "mpich": ({"PMI_RANK": "7", "PMI_SIZE": "8", "MPI_LOCALRANKID": "3"}, "rank-7", ""),
}  # fmt: skip


def test_ranks_of_every_launcher_register_under_their_true_rank_and_launch(live_server, owner):
    token = api_token_create(user=owner)[1]
    env = {"FLAMEDECK_URL": live_server.url, "FLAMEDECK_TOKEN": token, "FLAMEDECK_HOST": "local"}
    ranks = {
        name: _rank(snippet(), {**env, **launcher, "FLAMEDECK_RUN": name})
        for name, (launcher, _, _) in LAUNCHERS.items()
    }
    lines = {name: _first_line(proc) for name, proc in ranks.items()}
    for name, (_, role, launch) in LAUNCHERS.items():
        assert lines[name].startswith(f"flamedeck: {name} rank {role} "), lines[name]
        process = RunProcess.objects.select_related("launch").get(run__name=name)
        assert (process.pid, process.role, process.launch.key) == (ranks[name].pid, role, launch)
        assert process.layout is None


def test_a_rank_says_its_place_in_the_parallel_layout(live_server, owner):
    token = api_token_create(user=owner)[1]
    env = {"FLAMEDECK_URL": live_server.url, "FLAMEDECK_TOKEN": token, "FLAMEDECK_HOST": "local"}
    env |= {"FLAMEDECK_RUN": "layout", "RANK": "29", "FLAMEDECK_LAYOUT": "dp=7, tp=0, pp=3"}
    rank = _rank(snippet(), env)
    assert _first_line(rank).startswith("flamedeck: layout rank rank-29 ")
    assert RunProcess.objects.get(run__name="layout").layout == {"dp": 7, "tp": 0, "pp": 3}


def test_a_layout_it_cannot_read_is_left_out_and_the_rank_registers(live_server, owner):
    token = api_token_create(user=owner)[1]
    env = {"FLAMEDECK_URL": live_server.url, "FLAMEDECK_TOKEN": token, "FLAMEDECK_HOST": "local"}
    env |= {"FLAMEDECK_RUN": "typo", "RANK": "1", "FLAMEDECK_LAYOUT": "dp7,pp=3"}
    rank = _rank(snippet(), env)
    said = rank.stdout.readline()
    assert said.startswith("flamedeck: FLAMEDECK_LAYOUT ignored: give axis=number pairs"), said
    assert _first_line(rank).startswith("flamedeck: typo rank rank-1 ")
    assert RunProcess.objects.get(run__name="typo").layout is None


def test_an_unknown_axis_is_refused_with_a_line_that_names_it(live_server, owner):
    token = api_token_create(user=owner)[1]
    env = {"FLAMEDECK_URL": live_server.url, "FLAMEDECK_TOKEN": token, "FLAMEDECK_HOST": "local"}
    env |= {"FLAMEDECK_RUN": "axis", "RANK": "1", "FLAMEDECK_LAYOUT": "dpp=7"}
    line = _first_line(_rank(snippet(), env))
    assert line.startswith("flamedeck: not registered: 400") and "unknown axis 'dpp'" in line
    assert not RunProcess.objects.exists()


def _snippet_functions(monkeypatch) -> dict:
    """The snippet's functions, defined in this process (its own call does nothing:
    no FLAMEDECK_URL)."""
    for name in ("FLAMEDECK_URL", "FLAMEDECK_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    found: dict = {}
    exec(snippet(), found)  # noqa: S102 — the README's own block
    return found


@pytest.mark.parametrize(
    ("env", "role"),
    [
        # The innermost launcher wins: torchrun under srun, Lightning's own ranks in a
        # SLURM batch step, mpirun in an allocation.
        ({"RANK": "3", "SLURM_PROCID": "1", "LOCAL_RANK": "3", "NODE_RANK": "1"}, "rank-3"),
        ({"NODE_RANK": "0", "LOCAL_RANK": "2", "SLURM_PROCID": "0"}, "rank-2"),
        ({"OMPI_COMM_WORLD_RANK": "9", "PMIX_RANK": "9", "SLURM_PROCID": "0"}, "rank-9"),
        ({"PMIX_RANK": "4", "SLURM_PROCID": "4"}, "rank-4"),  # srun --mpi=pmix
        ({"MV2_COMM_WORLD_RANK": "11"}, "rank-11"),
        # Lightning's first process on node 2 (NODE_RANK set by hand), its ranks per node
        # unknown: named by node and local rank, never as another node's rank.
        ({"NODE_RANK": "2"}, "node-2-local-0"),
        ({"NODE_RANK": "2", "LOCAL_WORLD_SIZE": "4"}, "rank-8"),
        ({"LOCAL_RANK": "1"}, "rank-1"),  # a launcher of one node that sets only LOCAL_RANK
        ({"RANK": "07"}, "rank-7"),
        ({}, "rank-0"),
    ],
)
def test_the_snippet_reads_the_global_rank_in_its_documented_order(monkeypatch, env, role):
    assert _snippet_functions(monkeypatch)["flamedeck_role"](env) == role


@pytest.mark.parametrize(
    ("env", "launch"),
    [
        ({"FLAMEDECK_LAUNCH": "try-3", "TORCHELASTIC_RUN_ID": "abc"}, "try-3"),
        ({"TORCHELASTIC_RUN_ID": "abc", "SLURM_JOB_ID": "7"}, "abc"),
        ({"TORCHELASTIC_RUN_ID": "none", "SLURM_JOB_ID": "7", "SLURM_STEP_ID": "2"}, "slurm-7.2.0"),
        ({"SLURM_JOB_ID": "7", "SLURM_RESTART_COUNT": "1"}, "slurm-7.batch.1"),  # requeued
        ({"PMIX_NAMESPACE": "slurm.pmix.7.0", "SLURM_JOB_ID": "7"}, "slurm.pmix.7.0"),
        ({}, ""),
    ],
)
def test_the_launch_key_comes_from_the_launcher(monkeypatch, env, launch):
    assert _snippet_functions(monkeypatch)["flamedeck_launch"](env) == launch


class _Mesh:
    """What the snippet reads of a torch DeviceMesh (a real one: docs/jobs.md)."""

    mesh_dim_names = ("pp", "dp", "tp")

    def get_coordinate(self):
        return [3, 7, 0]


def test_the_layout_comes_from_a_device_mesh_a_dict_or_the_environment(monkeypatch):
    layout = _snippet_functions(monkeypatch)["flamedeck_layout"]
    assert layout(_Mesh(), {}) == {"pp": 3, "dp": 7, "tp": 0}
    assert layout({"dp": 1}, {"FLAMEDECK_LAYOUT": "dp=2"}) == {"dp": 1}
    assert layout(None, {"FLAMEDECK_LAYOUT": "dp=2,pp=0"}) == {"dp": 2, "pp": 0}
    assert layout(None, {}) is None


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
