"""The CLI contract: JSON and exit 0, or one line on stderr and exit 2; no traceback."""

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.profiles.pyspy.golden import DATA

ROOT = Path(__file__).resolve().parents[3]


def _run(*args):
    return subprocess.run(
        [sys.executable, "-m", "profiles.pyspy", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_it_prints_one_json_object_and_exits_0():
    done = _run("analyze", DATA / "threads.txt", "--log", DATA / "threads.txt.log")
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert stats["format"] == "raw"
    assert stats["flamegraph"]["value"] == stats["total_samples"]
    assert stats["lag"]["verdict"] == "ok"


def test_it_honours_max_nodes_keywords_and_thread_filters(tmp_path):
    keywords = tmp_path / "kw.txt"
    keywords.write_text("# mine\nwork: compress_block\n")
    done = _run(
        "analyze",
        DATA / "threads.txt",
        "--max-nodes",
        10,
        "--keywords",
        keywords,
        "--thread",
        "target-0",
        "--thread",
        "target-1",
    )
    stats = json.loads(done.stdout)
    assert [k["keyword"] for k in stats["keywords"]] == ["compress_block"]
    assert {t["name"] for t in stats["threads"]} <= {"target-0", "target-1"}
    assert _count_nodes(stats["flamegraph"]) <= 10


def test_it_takes_state_rules_library_entries_and_the_idle_setting(tmp_path):
    name = "states_starved_idle.txt"
    rules = tmp_path / "rules.txt"
    rules.write_text("# ours first\ncollective: Queue.get in queue.py\n", encoding="utf-8")
    args = ["analyze", DATA / name, "--log", DATA / f"{name}.log", "--no-flamegraph"]
    plain = json.loads(_run(*args, "--thread", "loader").stdout)
    assert _state(plain, "idle")["user_callers"][0]["frame"].startswith("slow_batch (")
    assert plain["idle_included"] is True and plain["rounds"] == 159
    assert {t["name"] for t in plain["threads"]} == {"loader"}
    assert sum(s["samples"] for s in plain["states"]) == plain["total_samples"]
    whole = json.loads(_run(*args).stdout)
    mine = json.loads(
        _run(*args, "--state-rules", rules, "--library", "states_target", "--no-idle").stdout
    )
    waits = _state(whole, "data_wait")["samples"]
    assert waits > 100 and _state(mine, "data_wait")["samples"] == 0
    assert _state(mine, "collective")["samples"] == waits
    assert mine["idle_included"] is False
    assert {c["frame"] for s in mine["states"] for c in s["user_callers"]} == {"(no user frame)"}
    bad = tmp_path / "bad.txt"
    bad.write_text("slow: x\n", encoding="utf-8")
    done = _run(*args, "--state-rules", bad)
    assert done.returncode == 2 and "unknown state 'slow'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def _state(stats, name):
    return next(s for s in stats["states"] if s["state"] == name)


def _count_nodes(node):
    return 1 + sum(_count_nodes(c) for c in node["children"])


def test_it_analyses_speedscope_and_gzip_input(tmp_path):
    path = tmp_path / "s.json.gz"
    path.write_bytes(gzip.compress((DATA / "speedscope.json").read_bytes()))
    done = _run("analyze", path, "--keywords", "none")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["format"] == "speedscope"


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"<svg xmlns='http://www.w3.org/2000/svg'></svg>",
        (DATA / "dump.txt").read_bytes(),
        b'{"profiles": [',
        b"\x1f\x8b\x08\x00broken",
        b"\xff\xd8\xff\x00\x10JFIF",
        b"just words\n",
        (DATA / "threads.txt.log").read_bytes(),
    ],
)
def test_it_exits_2_with_one_line_for_each_unusable_input(tmp_path, content):
    path = tmp_path / "bad"
    path.write_bytes(content)
    done = _run("analyze", path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["analyze", DATA / "missing.txt"],
        ["analyze", DATA / "threads.txt", "--max-nodes", "1"],
        ["analyze", DATA / "threads.txt", "--keywords", DATA / "missing.json"],
        ["analyze", DATA / "threads.txt", "--log", DATA / "threads.txt"],
        ["analyze"],
        ["lag", DATA / "threads.txt"],
        ["dump", DATA / "threads.txt"],
    ],
)
def test_it_exits_2_on_bad_arguments_and_files(args):
    done = _run(*args)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr


def test_it_exports_folded_and_speedscope():
    folded = _run("export", DATA / "threads.txt", "--to", "folded")
    assert folded.returncode == 0
    assert all(line.rsplit(" ", 1)[1].isdigit() for line in folded.stdout.splitlines())
    speedscope = json.loads(_run("export", DATA / "threads.txt", "--to", "speedscope").stdout)
    assert speedscope["$schema"] == "https://www.speedscope.app/file-format-schema.json"


def test_it_prints_dump_and_lag_json():
    dump = json.loads(_run("dump", DATA / "dump_native.txt").stdout)
    assert dump[0]["frames"]
    lag = json.loads(_run("lag", DATA / "lag_ctrlc.log").stdout)
    assert lag["recommended_rate"] < lag["requested_rate"]


def test_a_thread_filter_matching_no_thread_exits_2_listing_the_threads():
    done = _run("analyze", DATA / "threads.txt", "--thread", "nosuch")
    assert done.returncode == 2 and done.stdout == ""
    assert "--thread nosuch matches no thread; the file has: " in done.stderr
    assert "target-0 (13231)" in done.stderr and "loader (13230)" in done.stderr
    unthreaded = _run("analyze", DATA / "nolineno.txt", "--thread", "target-0")
    assert unthreaded.returncode == 2 and "no thread frames" in unthreaded.stderr
    by_tid = _run("analyze", DATA / "threads.txt", "--thread", "13231", "--no-flamegraph")
    assert by_tid.returncode == 0 and json.loads(by_tid.stdout)["total_samples"] > 0


def test_lag_prints_py_spys_error_and_refuses_a_text_that_is_not_a_py_spy_log(tmp_path):
    error_log = tmp_path / "err.log"
    error_log.write_text("Error: Failed to get process executable name.\n")
    done = _run("lag", error_log)
    assert done.returncode == 0
    assert json.loads(done.stdout)["error"] == "Failed to get process executable name."
    other = tmp_path / "other.log"
    other.write_text("hello\n")
    refused = _run("lag", other)
    assert refused.returncode == 2 and "is not a py-spy log" in refused.stderr
