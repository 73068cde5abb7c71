"""Each rank's GPU, sampled beside py-spy through the same connection and exec prefix.
There is no GPU here: the stand-in `nvidia-smi` (tests/support/nvidia_smi.py) prints
nvidia-smi's documented CSV formats, "[N/A]" fields included, from a scenario."""

import shlex
from dataclasses import replace
from pathlib import Path

import pytest

from runs.gpu import QUERY, parse_report, rank_devices
from runs.remote import RecordSettings, record
from tests.support.nvidia_smi import write_scenario

UUID0, UUID1 = (
    "GPU-5c1b2d3e-0000-1111-2222-333344445555",
    "GPU-9f8e7d6c-aaaa-bbbb-cccc-ddddeeeeffff",
)


def _scenario(pid: int) -> dict:
    return {
        "gpus": [
            {"index": 0, "uuid": UUID0, "util": [10, 20, 30], "mem_used": 100, "power": 80.5},
            {"index": 1, "uuid": UUID1, "util": "[N/A]", "mem_used": "[N/A]"},
        ],
        "apps": [[pid, UUID1, 30000]],
    }


def _prefix(env: dict[str, str]) -> str:
    return "env " + " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())


def _standin(tmp_path: Path, pid: int) -> tuple[str, Path]:
    env = write_scenario(tmp_path / "gpu-bin", _scenario(pid))
    return _prefix(env), Path(env["FLAMEDECK_NVSMI_SCENARIO"] + ".calls")


def _assert_rank_device(result, pid: int, calls: Path) -> None:
    assert result.raw and b"target-0" in result.raw
    report = parse_report(result.gpu_csv)
    assert [g["index"] for g in report["gpus"]] == [0, 1]
    assert report["start"] is not None  # on the host's epoch, as the stacks
    points = report["gpus"][0]["points"]
    assert len(points) >= 4 and {p["util"] for p in points} <= {10.0, 20.0, 30.0}
    assert report["gpus"][1]["points"][0]["util"] is None
    mine = rank_devices(report, pid)
    assert mine["mapping"]["source"] == "compute-apps" and mine["mapping"]["gpus"] == [1]
    said = calls.read_text()
    assert f"--query-gpu={QUERY}" in said and "--loop-ms=250" in said
    assert "--query-compute-apps=pid,gpu_uuid,used_memory" in said


def test_a_local_record_samples_the_ranks_gpu_over_the_same_window(
    local_target, workload, tmp_path
):
    prefix, calls = _standin(tmp_path, workload.pid)
    target = replace(local_target, exec_prefix=prefix)
    result = record(target, workload.pid, RecordSettings(duration_s=2, rate=50), margin_s=5)
    _assert_rank_device(result, workload.pid, calls)


@pytest.mark.sshd
def test_an_ssh_record_samples_the_ranks_gpu_through_the_exec_prefix(
    ssh_target, workload, tmp_path
):
    prefix, calls = _standin(tmp_path, workload.pid)
    target = replace(ssh_target, exec_prefix=prefix)
    result = record(target, workload.pid, RecordSettings(duration_s=2, rate=50), margin_s=5)
    _assert_rank_device(result, workload.pid, calls)


def test_a_host_without_nvidia_smi_says_so(local_target, workload, tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    target = replace(local_target, exec_prefix=_prefix({"PATH": f"{empty}:/usr/bin:/bin"}))
    result = record(target, workload.pid, RecordSettings(duration_s=1, rate=50), margin_s=5)
    assert result.raw
    report = parse_report(result.gpu_csv)
    assert report["available"] is False and "no nvidia-smi" in report["reason"]


def test_gpu_sampling_can_be_turned_off(local_target, workload, tmp_path):
    prefix, calls = _standin(tmp_path, workload.pid)
    target = replace(local_target, exec_prefix=prefix)
    settings = RecordSettings(duration_s=1, rate=50, gpu=False)
    result = record(target, workload.pid, settings, margin_s=5)
    assert result.raw and result.gpu_csv is None
    assert not calls.exists()


def test_a_multi_pid_record_maps_each_rank_to_its_own_gpu(local_target, tmp_path):
    from runs.remote import record_many
    from tests.support.workload import start_workload

    from .test_remote_many import Session

    with start_workload(threads=2) as one, start_workload(threads=2) as two:
        scenario = _scenario(one.pid)
        scenario["apps"].append([two.pid, UUID0, 1000])
        env = write_scenario(tmp_path / "gpu-bin", scenario)
        target = replace(local_target, exec_prefix=_prefix(env))
        outcome = record_many(target, [one.pid, two.pid], RecordSettings(duration_s=2, rate=50),
                              Session(), margin_s=5)  # fmt: skip
    report = parse_report(outcome.gpu_csv)
    assert rank_devices(report, one.pid)["mapping"]["gpus"] == [1]
    assert rank_devices(report, two.pid)["mapping"]["gpus"] == [0]
    assert all(b"target-0" in outcome.results[pid].raw for pid in (one.pid, two.pid))
