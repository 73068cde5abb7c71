"""One name per frame: real py-spy captures of one job, raw and speedscope, name every
frame alike; captures stored with full paths meet new ones; complete lists prove rises."""

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from profiles.pyspy import AnalysisOptions, analyze, read_profile
from profiles.pyspy.compare.captures import compare_frames
from profiles.pyspy.compare.regression import JudgeOptions, judge
from profiles.pyspy.core.frames import frame_key, short_names
from tests.support.requirements import require

PY_SPY = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
TARGET = """
import sys, time
from pathlib import Path
from mypkg.work import spin
from django.utils.text import slugify

def work_a():
    for _ in range(40):
        slugify("Hello World Example " * 20)
    spin(3000)

def work_b():
    s = 0
    for i in range(20000):
        s += i
    time.sleep(0.01)

flag = Path(sys.argv[1])
while True:
    work_b() if flag.exists() else work_a()
"""


def _job(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "work.py").write_text(
        "def spin(n):\n    s = 0\n    for i in range(n):\n        s += i * i\n    return s\n"
    )
    (tmp_path / "train.py").write_text(TARGET)
    flag = tmp_path / "switch"
    proc = subprocess.Popen([sys.executable, str(tmp_path / "train.py"), str(flag)], cwd=tmp_path)
    time.sleep(1.0)  # past the imports
    return proc, flag


def _record(pid: int, out: Path, fmt: str, native: bool = False) -> Path:
    """2 s at 100 Hz; with `native` py-spy shows the sleep (`clock_nanosleep`) as such."""
    done = subprocess.run(
        [PY_SPY, "record", "--pid", str(pid), "--rate", "100", "--duration", "2", "--idle",
         "--threads", "--format", fmt, "--output", str(out),
         "--native" if native else "--nonblocking"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    # py-spy is installed by `make setup` and records as root here: failing is a failure.
    assert done.returncode == 0 and out.exists(), (done.stdout[-300:], done.stderr[-300:])
    return out


@pytest.fixture
def job(tmp_path):
    require(PY_SPY, "py-spy", "make setup")
    proc, flag = _job(tmp_path)
    yield proc, flag, tmp_path
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def _stats(path: Path) -> dict:
    return analyze(read_profile(path), AnalysisOptions(include_flamegraph=False))


def test_a_raw_and_a_speedscope_capture_of_one_job_name_every_frame_alike(job):
    proc, _, folder = job
    raw = _stats(_record(proc.pid, folder / "a.txt", "raw"))
    speedscope = _stats(_record(proc.pid, folder / "a.json", "speedscope"))
    frames = [r["frame"] for r in speedscope["top_total"]]
    assert not [f for f in frames if "/" + "site-packages" in f or str(folder) in f]
    django = [f for f in frames if "(django/utils/text.py:" in f]
    assert django and any("(mypkg/work.py:" in f for f in frames)
    assert any(f.startswith("<module> (train.py:") for f in frames)
    # Nothing is "new" between the two formats: every frame with a share is on both sides.
    rows = compare_frames(raw, speedscope, "top_total")
    new = [r for r in rows if not r["before_percent"] and (r["after_percent"] or 0) >= 5]
    assert new == [] and any(r["frame"] in django for r in rows)


def test_a_capture_stored_with_full_paths_meets_a_new_one(job):
    proc, _, folder = job
    path = _record(proc.pid, folder / "a.json", "speedscope")
    new = _stats(path)
    full = {}
    for frame in json.loads(path.read_text())["shared"]["frames"]:
        named = f"{frame['name']} ({frame['file']}" + (
            f":{frame['line']})" if frame.get("line") else ")"
        )
        full[frame_key(named)] = named
    old = json.loads(json.dumps(new))  # as stats were stored before names were shortened
    for row in old["top_self"] + old["top_total"]:
        row["frame"] = full.get(frame_key(row["frame"]), row["frame"])
    assert any(r["frame"].startswith("/") or "(/" in r["frame"] for r in old["top_total"])
    rows = compare_frames(old, new, "top_total")
    assert all(r["before_percent"] == r["after_percent"] for r in rows)
    assert judge(old, new, JudgeOptions(min_samples=100))["moved"] == []


def test_a_switch_to_another_function_and_sleep_names_what_rose(job):
    proc, flag, folder = job
    before = _stats(_record(proc.pid, folder / "before.json", "speedscope", native=True))
    flag.write_text("")
    time.sleep(0.5)
    after = _stats(_record(proc.pid, folder / "after.json", "speedscope", native=True))
    moved = judge(before, after, JudgeOptions(min_samples=100))["moved"]
    # A row stands for its aliases too (the same samples under another name).
    rose = {k for r in moved if r["delta_points"] > 0 for k in (r["key"], *r["aliases"])}
    fell = {k for r in moved if r["delta_points"] < 0 for k in (r["key"], *r["aliases"])}
    assert "state:idle" in rose
    assert [k for k in rose if k.startswith(("self:work_b (", "total:work_b ("))]
    assert [k for k in fell if k.startswith(("self:work_a (", "total:work_a ("))]


def test_a_frame_absent_from_a_complete_list_had_no_samples():
    """A list shorter than its cap holds every frame: absent is 0, so a rise is proven."""
    before = {"total_samples": 600, "top_self": [{"frame": "work_a (train.py:8)", "samples": 600}]}
    after = {
        "total_samples": 600,
        "top_self": [
            {"frame": "work_b (train.py:14)", "samples": 200},
            {"frame": "clock_nanosleep (libc.so.6)", "samples": 400},
        ],
    }
    rows = {r["name"]: r for r in judge(before, after, JudgeOptions(min_samples=100))["rows"]}
    rise = rows["work_b (train.py:14)"]
    assert rise["bound"] == "exact" and rise["before"]["samples"] == 0 and rise["moved"]
    fall = rows["work_a (train.py:8)"]
    assert fall["bound"] == "exact" and fall["after"]["samples"] == 0 and fall["moved"]
    (frame,) = [r for r in compare_frames(before, after, "top_self") if "work_b" in r["frame"]]
    assert frame["before_percent"] == 0.0 and frame["delta_bound"] == "exact"


def test_names_follow_py_spys_rule_without_the_hosts_folders():
    full = [
        "<module> (/job/train.py:13)",
        "spin (/job/mypkg/work.py:5)",
        "slugify (/venv/lib/python3.11/site-packages/django/utils/text.py:482)",
        "sub (/usr/lib/python3.11/re/__init__.py:185)",
        "0x7f59e90f224a (/usr/lib/x86_64-linux-gnu/libc.so.6)",
        "thread (11): loader (1)",
        "run (<frozen runpy>:88)",
    ]
    assert short_names(full) == [
        "<module> (train.py:13)",
        "spin (mypkg/work.py:5)",
        "slugify (django/utils/text.py:482)",
        "sub (re/__init__.py:185)",
        "0x7f59e90f224a (libc.so.6)",
        "thread (11): loader (1)",
        "run (<frozen runpy>:88)",
    ]
    # A namespace folder py-spy leaves out still meets by key.
    assert frame_key("f (/site/ns/helper.py:3)") == frame_key("f (helper.py:3)")
    assert frame_key("g (/x/torch/__init__.py:1)") != frame_key("g (/x/numpy/__init__.py:1)")
