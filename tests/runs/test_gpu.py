"""nvidia-smi CSV parsing, on the format's real edge cases."""

from runs.gpu import nvidia_smi_argv, parse_nvidia_smi

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
    assert "--query-gpu=timestamp,index,utilization.gpu,memory.used,memory.total" in argv
    assert "--format=csv,noheader,nounits" in argv and "--loop-ms=250" in argv
