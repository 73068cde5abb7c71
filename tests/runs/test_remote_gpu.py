"""GPU context: nvidia-smi sampled beside py-spy, through the same connection and
exec prefix. There is no GPU here, so a stand-in `nvidia-smi` prints the documented
CSV format (with "[N/A]" and "[Not Supported]" fields) until it is stopped."""

from dataclasses import replace
from pathlib import Path

import pytest

from runs.gpu import parse_nvidia_smi
from runs.remote import RecordSettings, record

FAKE_NVIDIA_SMI = """#!/bin/sh
# Stand-in for nvidia-smi --query-gpu=... --format=csv,noheader,nounits --loop-ms=250
echo "$@" > "$(dirname "$0")/nvidia-smi.args"
i=0
while :; do
  now=$(date '+%Y/%m/%d %H:%M:%S.%N' | cut -c1-23)
  echo "$now, 0, $((50 + i % 40)), 40321, 81559"
  echo "$now, 1, [N/A], [Not Supported], 81559"
  i=$((i + 1))
  sleep 0.25
done
"""


@pytest.fixture
def fake_gpu_bin(tmp_path) -> Path:
    bin_dir = tmp_path / "gpu-bin"
    bin_dir.mkdir()
    script = bin_dir / "nvidia-smi"
    script.write_text(FAKE_NVIDIA_SMI)
    script.chmod(0o755)
    return bin_dir


def _prefix(bin_dir: Path) -> str:
    return f"env PATH={bin_dir}:/usr/local/bin:/usr/bin:/bin"


def _assert_timeline(result, bin_dir: Path) -> None:
    assert result.raw and b"target-0" in result.raw
    timeline = parse_nvidia_smi(result.gpu_csv)
    assert [g["index"] for g in timeline["gpus"]] == [0, 1]
    points = timeline["gpus"][0]["points"]
    assert len(points) >= 4 and points[-1]["t"] >= 1.0
    assert all(50 <= p["util"] < 90 for p in points)
    assert timeline["gpus"][1]["points"][0]["util"] is None
    args = (bin_dir / "nvidia-smi.args").read_text()
    assert "--query-gpu=timestamp,index,utilization.gpu,memory.used,memory.total" in args


def test_a_local_record_samples_the_gpus_over_the_same_window(local_target, workload, fake_gpu_bin):
    target = replace(local_target, exec_prefix=_prefix(fake_gpu_bin))
    result = record(target, workload.pid, RecordSettings(duration_s=2, rate=50), margin_s=5)
    _assert_timeline(result, fake_gpu_bin)


@pytest.mark.sshd
def test_an_ssh_record_samples_the_gpus_through_the_exec_prefix(ssh_target, workload, fake_gpu_bin):
    target = replace(ssh_target, exec_prefix=_prefix(fake_gpu_bin))
    result = record(target, workload.pid, RecordSettings(duration_s=2, rate=50), margin_s=5)
    _assert_timeline(result, fake_gpu_bin)


def test_a_host_without_nvidia_smi_simply_has_no_timeline(local_target, workload, tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    target = replace(local_target, exec_prefix=_prefix(empty))
    result = record(target, workload.pid, RecordSettings(duration_s=1, rate=50), margin_s=5)
    assert result.raw and result.gpu_csv is None


def test_gpu_sampling_can_be_turned_off(local_target, workload, fake_gpu_bin):
    target = replace(local_target, exec_prefix=_prefix(fake_gpu_bin))
    settings = RecordSettings(duration_s=1, rate=50, gpu=False)
    result = record(target, workload.pid, settings, margin_s=5)
    assert result.raw and result.gpu_csv is None
    assert not (fake_gpu_bin / "nvidia-smi.args").exists()


def test_a_multi_pid_record_samples_the_gpus_once_for_the_host(local_target, fake_gpu_bin):
    from runs.remote import record_many
    from tests.support.workload import start_workload

    from .test_remote_many import Session

    target = replace(local_target, exec_prefix=_prefix(fake_gpu_bin))
    with start_workload(threads=2) as one, start_workload(threads=2) as two:
        outcome = record_many(target, [one.pid, two.pid], RecordSettings(duration_s=2, rate=50),
                              Session(), margin_s=5)  # fmt: skip
    timeline = parse_nvidia_smi(outcome.gpu_csv)
    assert [g["index"] for g in timeline["gpus"]] == [0, 1]
    assert len(timeline["gpus"][0]["points"]) >= 4
    assert all(b"target-0" in outcome.results[pid].raw for pid in (one.pid, two.pid))
