"""End to end, no GPU: a real capture over loopback sshd of a real Python target, with
the stand-in nvidia-smi (tests/support/nvidia_smi.py) on the host's PATH naming the
target's PID as holding GPU 1, gives the rank's device series on its timeline, in a
window, and in the findings (its GPU idles while the step thread runs host code)."""

import shlex
import subprocess
import sys
import time

import pytest

from profiles.captures import enqueue, pipeline, services
from profiles.models import Capture
from runs.models import Host
from tests.support.nvidia_smi import write_scenario
from tests.support.sshd import ALIAS

pytestmark = [pytest.mark.sshd, pytest.mark.django_db(transaction=True)]
UUID0, UUID1 = (
    "GPU-5c1b2d3e-0000-1111-2222-333344445555",
    "GPU-9f8e7d6c-aaaa-bbbb-cccc-ddddeeeeffff",
)


def _host(tmp_path, pid: int) -> Host:
    scenario = {
        "gpus": [
            {"index": 0, "uuid": UUID0, "util": [97], "mem_used": 70000},
            {"index": 1, "uuid": UUID1, "util": [0, 2, 0, 1], "mem_used": 30000, "power": 95.0},
        ],
        "apps": [[pid, UUID1, 30000]],
    }
    env = write_scenario(tmp_path / "gpu-bin", scenario)
    prefix = "env " + " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
    local = Host.objects.get(name="local")
    return Host.objects.create(
        name="gpu-node", transport="ssh", address=ALIAS, exec_prefix=prefix, py_spy=local.py_spy
    )


# One step thread that never waits: its host code holds the device idle all along (a
# workload whose threads wait on a queue part of the time, on a loaded machine, left the
# device idle beside `idle` as much as beside host code, and the rule rightly held back).
HOST_BOUND = """
import time
def prepare_batch():
    total = 0
    for i in range(200_000):
        total += i * i
    return total
while True:
    prepare_batch()
"""


@pytest.fixture
def host_bound_rank():
    proc = subprocess.Popen([sys.executable, "-c", HOST_BOUND])
    time.sleep(0.3)
    yield proc
    proc.kill()
    proc.wait()


def test_a_real_capture_gives_the_ranks_device_on_its_timeline_and_in_its_findings(
    client, owner, host_bound_rank, sshd, tmp_path, settings, monkeypatch
):
    settings.FLAMEDECK_SSH_CONFIG = str(sshd.config)
    monkeypatch.setattr(enqueue, "capture_enqueue", lambda *, capture: None)
    host = _host(tmp_path, host_bound_rank.pid)
    capture = services.capture_create(
        user=owner, host=host, pid=host_bound_rank.pid, duration=4, rate=50, idle=True
    )
    assert pipeline.capture_execute(capture_id=capture.pk) == "done"
    capture = Capture.objects.get(pk=capture.pk)
    assert capture.gpu_samples["mapping"]["source"] == "compute-apps"
    assert [g["index"] for g in capture.gpu_samples["gpus"]] == [1]  # its GPU, not the host's

    client.force_login(owner)
    line = client.get(f"/api/captures/{capture.pk}/timeline/").json()
    assert "device" in line, (line, capture.stats.get("time"), capture.time_file)
    device = line["device"]
    assert [g["index"] for g in device["gpus"]] == [1]
    util = [u for u in device["gpus"][0]["util"] if u is not None]
    assert len(util) >= 8 and max(util) <= 2  # the replayed series, on the stacks' buckets
    assert len(device["gpus"][0]["util"]) == len(line["threads"][0]["dominant"])

    window = client.get(f"/api/captures/{capture.pk}/window/?from=1&to=3").json()
    assert window["device"]["util"] <= 2 and window["device"]["readings"] >= 4

    stats = capture.stats
    assert stats["device"]["available"] and stats["device"]["util_percent"] <= 2
    starved = [f for f in stats["findings"] if f["rule"] == "device_starved"]
    assert starved and starved[0]["state"] == "compute"  # the rank's only thread burns CPU
    assert "prepare_batch" in str(starved[0]), starved[0]  # the frame that held the host
    assert "device_bound" not in {f["rule"] for f in stats["findings"]}
