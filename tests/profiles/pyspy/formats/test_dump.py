"""`py-spy dump` text and --json into per-thread stacks."""

import json

import pytest

from profiles.pyspy import ProfileError, parse_dump
from tests.profiles.pyspy.golden import DATA


def test_it_reads_threads_with_status_and_frames_innermost_first():
    threads = parse_dump((DATA / "dump.txt").read_text())
    main = threads[0]
    assert (main["name"], main["status"], main["idle"], main["active"]) == (
        "MainThread",
        "idle",
        True,
        False,
    )
    assert main["frames"][-1]["name"] == "<module>"
    assert main["frames"][0]["native"] is False


def test_it_marks_native_frames_in_native_dumps():
    threads = parse_dump((DATA / "dump_native.txt").read_text())
    frames = [f for t in threads for f in t["frames"]]
    assert any(f["native"] and f["location"] == "libc.so.6" for f in frames)


def test_it_keeps_arguments_and_locals():
    threads = parse_dump((DATA / "dump_locals.txt").read_text())
    first = threads[0]["frames"][0]
    assert {"name": "seconds", "value": "30", "arg": True} in first["locals"]


def test_json_and_text_dumps_give_the_same_shape():
    from_json = parse_dump((DATA / "dump_json.json").read_text())
    assert {t["name"] for t in from_json} >= {"MainThread", "loader"}
    assert all(isinstance(t["tid"], int) for t in from_json)


def test_it_reads_active_and_gil_status():
    text = 'Process 1: python\nThread 0x7F01 (active+gil): "w"\n    f (a.py:1)\nThread 9\n'
    first, second = parse_dump(text)
    assert (first["tid"], first["active"], first["gil"]) == ("0x7F01", True, True)
    assert (second["status"], second["active"], second["name"]) == ("", None, "")


def test_it_refuses_text_that_is_not_a_dump():
    with pytest.raises(ProfileError):
        parse_dump("a;b 3\n")
    with pytest.raises(ProfileError):
        parse_dump("[1, 2")


DUMPS = DATA.parents[0] / "dumps"


def _without_short_filenames(doc: list) -> list:
    for thread in doc:
        for frame in thread["frames"]:
            frame.pop("short_filename", None)
    return doc


@pytest.mark.parametrize("case", ["own_code", "loader_deadlock"])
def test_a_json_dump_without_short_filename_names_frames_as_py_spy_does(case):
    """Real dumps of a torch DDP job: py-spy's own `short_filename` on every frame is
    what the full `filename` alone gives, and the full file stays as `path`."""
    for path in sorted((DUMPS / case).glob("rank-*.json")):
        doc = json.loads(path.read_text())
        with_short = parse_dump(json.dumps(doc))
        only_full = parse_dump(json.dumps(_without_short_filenames(doc)))
        assert only_full == with_short, path.name
    frames = {f["location"]: f.get("path") for t in only_full for f in t["frames"]}
    graph = next(loc for loc in frames if loc.startswith("torch/autograd/graph.py:"))
    assert frames[graph].endswith("/site-packages/torch/autograd/graph.py")
    assert frames["libc.so.6"] == "/usr/lib/x86_64-linux-gnu/libc.so.6"
    assert not [loc for loc in frames if loc.startswith("/")]


def test_a_dump_with_full_filenames_only_shortens_the_script_by_its_folder():
    """`--json` with `filename` alone (and text printed with --full-filenames): a script
    in its folder keeps its path below it, installed code its package path."""
    frames = [
        {"name": "step", "filename": "/srv/job/lib/steps.py", "line": 7},
        {"name": "Trainer.train", "line": 1675,
         "filename": "/opt/venv/lib/python3.11/site-packages/transformers/trainer.py"},
        {"name": "<module>", "filename": "/srv/job/train.py", "line": 3},
    ]  # fmt: skip
    doc = [{"thread_name": "MainThread", "os_thread_id": 5, "active": True, "frames": frames}]
    text = 'Thread 5 (active): "MainThread"\n' + "".join(
        f"    {f['name']} ({f['filename']}:{f['line']})\n" for f in frames
    )
    for threads in (parse_dump(json.dumps(doc)), parse_dump(text)):
        named = [(f["name"], f["location"], f["path"]) for f in threads[0]["frames"]]
        assert named == [
            ("step", "lib/steps.py:7", "/srv/job/lib/steps.py"),
            ("Trainer.train", "transformers/trainer.py:1675", frames[1]["filename"]),
            ("<module>", "train.py:3", "/srv/job/train.py"),
        ]


def test_hostile_full_filenames_stay_text_in_their_path():
    evil = "/srv/<img src=x onerror=alert(1)>/train.py"
    doc = [{"thread_name": "MainThread", "os_thread_id": 5, "active": True,
            "frames": [{"name": "<module>", "filename": evil, "line": 3}]}]  # fmt: skip
    (frame,) = parse_dump(json.dumps(doc))[0]["frames"]
    assert (frame["location"], frame["path"]) == ("train.py:3", evil)
