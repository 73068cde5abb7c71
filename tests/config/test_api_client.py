"""A client generated from the live schema works (issue 49): docs/api.md's two commands
generate it with openapi-python-client into a temporary folder, mypy --strict checks it
and the flow script that uses it (tests/config/api_client_flow.py, every answer narrowed
to the schema's model, no cast), and the flow runs on real parts: a live server on
PostgreSQL, a real worker, two sshd "hosts" on loopback and py-spy on real processes."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from profiles.models import CaptureGroup
from runs.models import Host, Run
from runs.tokens import api_token_create
from tests.support.requirements import require, require_sshd
from tests.support.sshd import SSHServer, cluster_config
from tests.support.worker import WorkerProcess
from tests.support.workload import start_workload

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
FLOW = Path(__file__).with_name("api_client_flow.py")

# Strict, but for the generator's own client.py template: its context-manager methods
# pass `*args: object` on to httpx's typed `__exit__` (openapi-python-client 0.29, mypy
# 2.4: 12 errors there, none in what the schema generates: models and operations).
MYPY_INI = """[mypy]
strict = True
python_version = 3.11
[mypy-flamedeck_client.client]
ignore_errors = True
"""

pytestmark = [
    pytest.mark.services,
    pytest.mark.sshd,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]


def generate_commands() -> str:
    text = (ROOT / "docs" / "api.md").read_text()
    block = re.search(
        r"<!-- client-commands:start -->\n```sh\n(.*?)```\n<!-- client-commands:end -->", text, re.S
    )
    assert block, "docs/api.md lost its client-commands markers"
    commands = [line for line in block.group(1).splitlines() if line.strip()]
    assert len(commands) == 2, commands
    return "\n".join(commands)


def _in(folder: Path, argv: list[str], env: dict[str, str], timeout: float):
    done = subprocess.run(
        argv, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{argv[:3]}: {done.stdout[-3000:]}{done.stderr[-3000:]}"
    return done


def test_the_docs_name_the_generator_and_mypy_in_the_dev_extra():
    dev = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'"openapi-python-client>=[\d.]+"', dev)
    assert re.search(r'"mypy>=[\d.]+"', dev)
    assert "openapi-python-client generate" in generate_commands()


@pytest.fixture
def two_nodes(tmp_path):
    """Two real sshd "hosts" on loopback, node-0 and node-1, and the ssh_config naming them."""
    require_sshd()
    servers = [SSHServer().start(), SSHServer().start()]
    yield cluster_config(servers, tmp_path)
    for server in servers:
        server.cleanup()


def test_a_generated_client_type_checks_and_drives_a_whole_job_flow(
    live_server, owner, settings, two_nodes, tmp_path
):
    require(str(BIN / "openapi-python-client"), "openapi-python-client", "pip install -e '.[dev]'")
    require(str(BIN / "mypy"), "mypy", "pip install -e '.[dev]'")
    require("/usr/bin/curl", "curl", "apt-get install curl")
    ssh_config = two_nodes
    settings.FLAMEDECK_SSH_CONFIG = str(ssh_config)  # the live server asks the hosts too
    py_spy = Host.objects.get(name="local").py_spy
    for name in ("node-0", "node-1"):
        Host.objects.create(name=name, transport="ssh", address=name, py_spy=py_spy)
    token = api_token_create(user=owner)[1]
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    env |= {"FLAMEDECK_URL": live_server.url, "FLAMEDECK_TOKEN": token}
    # The docs' two commands, as written, in a folder of their own.
    _in(tmp_path, ["bash", "-euc", generate_commands()], env, timeout=120)
    assert (tmp_path / "flamedeck_client" / "models" / "group.py").exists()
    shutil.copy(FLOW, tmp_path / FLOW.name)
    (tmp_path / "mypy.ini").write_text(MYPY_INI)
    mypy = [str(BIN / "mypy"), "--config-file", "mypy.ini", "--cache-dir", ".mypy_cache"]
    # The flow and the whole generated package: every model and every operation (a body
    # the server cannot do without is `required`, so no operation passes an absent one on).
    checked = _in(tmp_path, [*mypy, FLOW.name, "flamedeck_client"], env, timeout=300)
    assert checked.stdout.startswith("Success: no issues found"), checked.stdout

    worker = WorkerProcess(tmp_path / "w.log", env={"FLAMEDECK_SSH_CONFIG": str(ssh_config)})
    targets = [start_workload(threads=2), start_workload(threads=2)]
    ranks = [f"node-{i}:{target.pid}:rank-{i}" for i, target in enumerate(targets)]
    try:
        flow = [sys.executable, FLOW.name, "client-flow", *ranks]
        answer = json.loads(_in(tmp_path, flow, {**env, "PYTHONPATH": "."}, timeout=400).stdout)
    finally:
        worker.stop()
        for target in targets:
            target.stop()

    run = Run.objects.get(name="client-flow")
    assert answer["runs"] == [run.pk]
    assert answer["run_urls"] == [live_server.url + run.get_absolute_url()]
    assert answer["processes"] == [
        ["rank-0", "node-0", targets[0].pid],
        ["rank-1", "node-1", targets[1].pid],
    ]
    first, second = (CaptureGroup.objects.get(pk=pk) for pk in answer["records"])
    assert answer["report_status"] == ["stored", "stored"]
    assert answer["ranks_captured"] == ["rank-0", "rank-1"]
    assert all(c.status == "done" and c.stats["total_samples"] > 0 for c in first.captures.all())
    assert answer["findings"] == [f["rule"] for f in first.job_report["findings"]]
    assert answer["straggler"] == (first.job_report.get("straggler") or {}).get("name")
    dump = CaptureGroup.objects.get(pk=answer["dump"])
    assert dump.kind == "dump" and answer["verdict"] == dump.stacks["verdict"]["kind"]
    assert answer["dump_ranks"] == ["rank-0", "rank-1"]
    assert answer["compared"] == [first.pk, second.pk]
    assert sorted(answer["roles"]) == ["rank-0", "rank-1"]
    assert all(answer["roles"][role] for role in answer["roles"]), answer["roles"]
