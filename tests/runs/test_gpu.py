"""nvidia-smi CSV parsing, on the format's real edge cases."""

import pytest

from runs.gpu import (
    APPS_QUERY,
    MARK,
    QUERY,
    nvidia_smi_argv,
    parse_nvidia_smi,
    parse_report,
    rank_devices,
    shell,
)

CSV = """\
2026/11/29 19:36:07.100, 0, 87, 40321, 81559
2026/11/29 19:36:07.101, 1, [N/A], [Not Supported], 81559
2026/11/29 19:36:07.350, 0, 12, 40400, 81559
2026/11/29 19:36:07.351, 1, 0, 1, 81559
"""


def test_it_reads_one_series_per_gpu_with_seconds_from_the_first_line():
    timeline = parse_nvidia_smi(CSV)
    assert [g["index"] for g in timeline["gpus"]] == [0, 1]
    gpu0 = timeline["gpus"][0]["points"]
    assert [(p["t"], p["util"], p["mem_used_mib"]) for p in gpu0] == [
        (0.0, 87.0, 40321.0),
        (0.25, 12.0, 40400.0),
    ]
    assert timeline["skipped_lines"] == 0


def test_fields_a_gpu_cannot_report_are_none_not_zero():
    point = parse_nvidia_smi(CSV)["gpus"][1]["points"][0]
    assert point["util"] is None and point["mem_used_mib"] is None
    assert point["mem_total_mib"] == 81559.0


def test_a_header_blank_lines_and_garbage_are_skipped_and_counted():
    text = (
        "timestamp, index, utilization.gpu [%], memory.used [MiB], memory.total [MiB]\n\n"
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
        "2026/11/29 19:36:07.100, 0, 50 %, 100 MiB, 200 MiB\n2026/11/29 19:36, 0\n"
    )
    timeline = parse_nvidia_smi(text)
    assert timeline["skipped_lines"] == 2
    assert timeline["gpus"][0]["points"][0]["util"] == 50.0


def test_empty_output_gives_no_gpus():
    assert parse_nvidia_smi("")["gpus"] == []


def test_the_query_asks_for_the_columns_the_parser_reads():
    argv = nvidia_smi_argv(250)
    assert f"--query-gpu={QUERY}" in argv
    assert "--format=csv,noheader,nounits" in argv and "--loop-ms=250" in argv
    assert {"utilization.gpu", "memory.used", "power.draw", "uuid"} <= set(QUERY.split(","))


UUID0, UUID1 = (
    "GPU-5c1b2d3e-0000-1111-2222-333344445555",
    "GPU-9f8e7d6c-aaaa-bbbb-cccc-ddddeeeeffff",
)


def _report(pid_lines: str, apps: str, samples: str) -> str:
    return (
        "# flamedeck-gpu clock 1764410167.000000000 2026/11/29 10:56:07.000000000\n"
        f"# flamedeck-gpu query {QUERY}\n{pid_lines}# flamedeck-gpu apps\n{apps}"
        f"# flamedeck-gpu samples\n{samples}"
    )


SAMPLES = (
    f"2026/11/29 10:56:07.500, 0, {UUID0}, 87, 41, 40321, 81559, 412.30\n"
    f"2026/11/29 10:56:07.501, 1, {UUID1}, [N/A], [N/A], 1, 81559, [N/A]\n"
    f"2026/11/29 10:56:07.750, 0, {UUID0}, 12, 5, 40400, 81559, 120.00\n"
    f"2026/11/29 10:56:07.751, 1, {UUID1}, [N/A], [N/A], 1, 81559, [N/A]\n"
)


def test_the_report_puts_nvidia_smis_local_timestamps_on_the_hosts_epoch():
    report = parse_report(_report("", "", SAMPLES))
    # clock: epoch 1764410167.0 was local 10:56:07.000; the first reading is 0.5 s later.
    assert report["start"] == pytest.approx(1764410167.5)
    first = report["gpus"][0]["points"][0]
    assert first == {"t": 0.0, "util": 87.0, "mem_util": 41.0, "mem_used_mib": 40321.0,
                     "mem_total_mib": 81559.0, "power_w": 412.3}  # fmt: skip
    assert report["gpus"][0]["uuid"] == UUID0


def test_a_field_the_device_cannot_report_is_none_never_zero():
    point = parse_report(_report("", "", SAMPLES))["gpus"][1]["points"][0]
    assert point["util"] is None and point["power_w"] is None and point["mem_used_mib"] == 1.0


def test_a_rank_gets_the_gpu_its_child_holds_a_compute_context_on():
    pids = "# flamedeck-gpu pid 4242 kids= 4250 4251 env=-\n"
    apps = f"4250, {UUID1}, 30000\n9999, {UUID0}, 1000\n"
    mine = rank_devices(parse_report(_report(pids, apps, SAMPLES)), 4242)
    assert [g["index"] for g in mine["gpus"]] == [1]
    assert mine["mapping"]["source"] == "compute-apps"
    assert mine["mapping"]["pids"] == [4242, 4250, 4251]
    assert "processes" not in mine


@pytest.mark.parametrize(
    ("env", "expected", "note"),
    [("1", [1], "PCI"), (UUID0[:12], [0], None), ("0,1", [0, 1], "PCI")],
)
def test_without_a_listed_context_cuda_visible_devices_names_the_gpus(env, expected, note):
    pids = f"# flamedeck-gpu pid 4242 kids= env={env}\n"
    mine = rank_devices(parse_report(_report(pids, "", SAMPLES)), 4242)
    assert [g["index"] for g in mine["gpus"]] == expected
    assert mine["mapping"]["source"] == "CUDA_VISIBLE_DEVICES"
    assert (note in (mine["mapping"]["note"] or "")) if note else mine["mapping"]["note"] is None


def test_a_mig_instance_or_an_unreadable_environment_is_unmapped_with_the_reason():
    mig = "# flamedeck-gpu pid 1 kids= env=MIG-4a5b6c7d-1111-2222-3333-444455556666\n"
    got = rank_devices(parse_report(_report(mig, "", SAMPLES)), 1)
    assert got["mapping"]["source"] == "host" and "MIG" in got["mapping"]["note"]
    hidden = "# flamedeck-gpu pid 2 kids= env=?\n"
    got = rank_devices(parse_report(_report(hidden, f"77, {UUID0}, [N/A]\n", SAMPLES)), 2)
    assert got["mapping"]["source"] == "host"
    assert "container" in got["mapping"]["note"] and "could not be read" in got["mapping"]["note"]
    assert len(got["gpus"]) == 2  # shown, and read by no rule


def test_an_environment_value_with_more_than_gpu_ids_is_never_kept():
    pids = "# flamedeck-gpu pid 3 kids= env=0;rm -rf /\n"
    report = parse_report(_report(pids, "", SAMPLES))
    assert report["processes"]["pids"][3]["env"] == "?"


def test_a_host_without_nvidia_smi_says_so():
    report = parse_report("# flamedeck-gpu missing\n")
    assert report["available"] is False and "no nvidia-smi" in report["reason"]
    assert report["gpus"] == []


def test_a_failed_driver_is_named_in_the_reason():
    said = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    text = _report("", "", said + " Make sure that the latest NVIDIA driver is installed.\n")
    report = parse_report(text)
    assert report["available"] is False and "couldn't communicate" in report["reason"]


def test_every_value_in_the_host_script_is_quoted():
    script = shell()
    assert f"'{MARK}'" in script and f"--query-gpu={QUERY}" in script
    assert f"--query-compute-apps={APPS_QUERY}" in script
